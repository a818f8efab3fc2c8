// Package unsafe_checkretry_5xx retries 429 and, unconditionally, 5xx:
// its POSTs are retried after a response the server may have processed.
package unsafe_checkretry_5xx

import (
	"context"
	"net/http"

	"github.com/hashicorp/go-retryablehttp"
)

type client struct {
	rc       *retryablehttp.Client
	disabled bool
}

func newClient() *client {
	c := &client{rc: retryablehttp.NewClient()}
	c.rc.CheckRetry = c.check
	return c
}

func (c *client) check(ctx context.Context, resp *http.Response, err error) (bool, error) {
	if ctx.Err() != nil {
		return false, ctx.Err()
	}
	if err != nil {
		return false, err
	}
	if !c.disabled && (resp.StatusCode == 429 || resp.StatusCode >= 500) {
		return true, nil
	}
	return false, nil
}

func (c *client) charge() {
	req, _ := retryablehttp.NewRequest(http.MethodPost, "https://api.example.com/charges", nil) // want `POST retried by go-retryablehttp without an Idempotency-Key`
	c.rc.Do(req)
}

// Package safe_checkretry_optin retries 429 by default and errors and 5xx
// only when the caller turns retryServerErrors on, as go-tfe does: by
// default a POST is retried only after the server refused it.
package safe_checkretry_optin

import (
	"context"
	"net/http"

	"github.com/hashicorp/go-retryablehttp"
)

type client struct {
	rc                *retryablehttp.Client
	retryServerErrors bool
}

func newClient() *client {
	c := &client{rc: retryablehttp.NewClient()}
	c.rc.CheckRetry = c.retryHTTPCheck
	return c
}

func (c *client) retryHTTPCheck(ctx context.Context, resp *http.Response, err error) (bool, error) {
	if ctx.Err() != nil {
		return false, ctx.Err()
	}
	if err != nil {
		return c.retryServerErrors, err
	}
	if resp.StatusCode == 429 || (c.retryServerErrors && resp.StatusCode >= 500) {
		return true, nil
	}
	return false, nil
}

func (c *client) charge() {
	req, _ := retryablehttp.NewRequest(http.MethodPost, "https://api.example.com/charges", nil)
	c.rc.Do(req)
}

// Package unsafe_checkretry sets a CheckRetry that retries every method:
// its POSTs are as unsafe as without it.
package unsafe_checkretry

import (
	"context"
	"net/http"

	"github.com/hashicorp/go-retryablehttp"
)

func client() *retryablehttp.Client {
	c := retryablehttp.NewClient()
	c.CheckRetry = retryablehttp.ErrorPropagatedRetryPolicy
	return c
}

func clientOwn() *retryablehttp.Client {
	c := retryablehttp.NewClient()
	c.CheckRetry = retryOnServerErrors
	return c
}

// retryOnServerErrors retries 5xx and errors, whatever the method.
func retryOnServerErrors(ctx context.Context, resp *http.Response, err error) (bool, error) {
	if err != nil {
		return true, nil
	}
	return resp.StatusCode >= 500, nil
}

func charge(c *retryablehttp.Client) {
	req, _ := retryablehttp.NewRequest("POST", "https://api.example.com/charges", nil) // want `POST retried by go-retryablehttp without an Idempotency-Key`
	c.Do(req)
}

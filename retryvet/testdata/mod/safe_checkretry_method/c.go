// Package safe_checkretry_method sets a CheckRetry that refuses POST: its
// POSTs are sent once.
package safe_checkretry_method

import (
	"context"
	"net/http"

	"github.com/hashicorp/go-retryablehttp"
)

func client() *retryablehttp.Client {
	c := retryablehttp.NewClient()
	c.CheckRetry = func(ctx context.Context, resp *http.Response, err error) (bool, error) {
		if resp != nil && resp.Request.Method == http.MethodPost {
			return false, nil
		}
		return retryablehttp.DefaultRetryPolicy(ctx, resp, err)
	}
	return c
}

func charge(c *retryablehttp.Client) {
	req, _ := retryablehttp.NewRequest("POST", "https://api.example.com/charges", nil)
	c.Do(req)
}

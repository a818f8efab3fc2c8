// Package app calls a retry helper of another package with a closure that
// POSTs.
package app

import (
	"context"
	"net/http"
	"strings"

	"retryvettest/helpers/pause"
	"retryvettest/helpers/retrier"
)

func charge(ctx context.Context, c *http.Client) error {
	return retrier.Do(ctx, 3, func(ctx context.Context) error {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "https://api.example.com/charges", strings.NewReader("{}"))
		_, err := c.Do(req) // want `POST retried by retrier.Do without an Idempotency-Key`
		return err
	})
}

// chargeLoop waits between its attempts in another package.
func chargeLoop(ctx context.Context, c *http.Client) error { // want chargeLoop:`sends a POST \(chargeLoop\)`
	var err error
	for attempt := 1; attempt <= 3; attempt++ {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "https://api.example.com/charges", strings.NewReader("{}"))
		var resp *http.Response
		if resp, err = c.Do(req); err == nil { // want `POST retried by this loop without an Idempotency-Key`
			return resp.Body.Close()
		}
		pause.For(ctx, attempt)
	}
	return err
}

// each sends a POST per item, one after another: no wait, no retry.
func each(c *http.Client, items []string) { // want each:`sends a POST \(each\)`
	for _, it := range items {
		if resp, err := c.Post("https://api.example.com/items", "application/json", strings.NewReader(it)); err == nil {
			resp.Body.Close()
		}
	}
}

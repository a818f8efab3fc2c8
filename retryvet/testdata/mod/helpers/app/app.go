// Package app calls a retry helper of another package with a closure that
// POSTs.
package app

import (
	"context"
	"net/http"
	"strings"

	"retryvettest/helpers/retrier"
)

func charge(ctx context.Context, c *http.Client) error {
	return retrier.Do(ctx, 3, func(ctx context.Context) error {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "https://api.example.com/charges", strings.NewReader("{}"))
		_, err := c.Do(req) // want `POST retried by retrier.Do without an Idempotency-Key`
		return err
	})
}

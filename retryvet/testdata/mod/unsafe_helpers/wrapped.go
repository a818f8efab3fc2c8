package unsafe_helpers

import (
	"bytes"
	"context"
	"net/http"

	backoff4 "github.com/cenkalti/backoff/v4"
)

// wrapped hands its operation to backoff inside a closure of its own.
func wrapped(ctx context.Context, op func(context.Context) error) error { // want wrapped:"retries its parameter 1"
	return backoff4.Retry(func() error { return op(ctx) }, backoff4.WithContext(backoff4.NewExponentialBackOff(), ctx))
}

func useWrapped(ctx context.Context, c *http.Client, body []byte) error {
	return wrapped(ctx, func(ctx context.Context) error {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "https://api.example.com/charges", bytes.NewReader(body))
		resp, err := c.Do(req) // want `POST retried by wrapped without an Idempotency-Key`
		if err != nil {
			return err
		}
		return resp.Body.Close()
	})
}

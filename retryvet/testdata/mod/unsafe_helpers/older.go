package unsafe_helpers

import (
	"bytes"
	"context"
	"net/http"
	"time"

	rican7 "github.com/Rican7/retry"
	avast3 "github.com/avast/retry-go"
	backoff2 "github.com/cenkalti/backoff"
	"github.com/eapache/go-resiliency/retrier"
)

// The retry helpers of cenkalti/backoff before v3 (no major in its path),
// avast/retry-go v3, Rican7/retry and eapache/go-resiliency.

func backoffV2(c *http.Client, body []byte) error {
	return backoff2.Retry(func() error {
		resp, err := c.Post("https://api.example.com/charges", "application/json", bytes.NewReader(body)) // want `POST retried by backoff.Retry without an Idempotency-Key`
		if err != nil {
			return err
		}
		return resp.Body.Close()
	}, backoff2.NewExponentialBackOff())
}

func retryGoV3(c *http.Client, body []byte) error {
	return avast3.Do(func() error {
		req, _ := http.NewRequest(http.MethodPatch, "https://api.example.com/orders/1", bytes.NewReader(body))
		_, err := c.Do(req) // want `PATCH retried by retry.Do without an Idempotency-Key`
		return err
	}, avast3.Attempts(3))
}

func rican(c *http.Client, body []byte) error {
	return rican7.Retry(func(attempt uint) error {
		_, err := c.Post("https://api.example.com/charges", "application/json", bytes.NewReader(body)) // want `POST retried by retry.Retry without an Idempotency-Key`
		return err
	})
}

func resiliency(ctx context.Context, c *http.Client, body []byte) error {
	r := retrier.New(retrier.ExponentialBackoff(3, 100*time.Millisecond), nil)
	if err := r.Run(func() error {
		_, err := c.Post("https://api.example.com/charges", "application/json", bytes.NewReader(body)) // want `POST retried by retrier.Run without an Idempotency-Key`
		return err
	}); err != nil {
		return err
	}
	return r.RunCtx(ctx, func(ctx context.Context) error {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "https://api.example.com/refunds", bytes.NewReader(body))
		_, err := c.Do(req) // want `POST retried by retrier.RunCtx without an Idempotency-Key`
		return err
	})
}

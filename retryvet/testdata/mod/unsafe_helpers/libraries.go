package unsafe_helpers

import (
	"bytes"
	"context"
	"net/http"
	"time"

	avast "github.com/avast/retry-go/v4"
	backoff3 "github.com/cenkalti/backoff/v3"
	backoff4 "github.com/cenkalti/backoff/v4"
	backoff5 "github.com/cenkalti/backoff/v5"
	"github.com/google/uuid"
	sethvargo "github.com/sethvargo/go-retry"
)

func backoffV3(c *http.Client, body []byte) error {
	return backoff3.RetryNotify(func() error {
		req, _ := http.NewRequest(http.MethodPost, "https://api.example.com/charges", bytes.NewReader(body))
		resp, err := c.Do(req) // want `POST retried by backoff.RetryNotify without an Idempotency-Key`
		if err != nil {
			return err
		}
		return resp.Body.Close()
	}, backoff3.NewExponentialBackOff(), nil)
}

func backoffV4(c *http.Client, body []byte) error {
	return backoff4.Retry(func() error {
		resp, err := c.Post("https://api.example.com/charges", "application/json", bytes.NewReader(body)) // want `POST retried by backoff.Retry without an Idempotency-Key`
		if err != nil {
			return err
		}
		return resp.Body.Close()
	}, backoff4.NewExponentialBackOff())
}

func backoffV5(ctx context.Context, c *http.Client, body []byte) (*http.Response, error) {
	return backoff5.Retry(ctx, func() (*http.Response, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "https://api.example.com/charges", bytes.NewReader(body))
		return c.Do(req) // want `POST retried by backoff.Retry without an Idempotency-Key`
	}, backoff5.WithBackOff(backoff5.NewExponentialBackOff()))
}

func retryGo(c *http.Client, body []byte) error {
	return avast.Do(func() error {
		req, _ := http.NewRequest("PATCH", "https://api.example.com/orders/1", bytes.NewReader(body))
		_, err := c.Do(req) // want `PATCH retried by retry.Do without an Idempotency-Key`
		return err
	}, avast.Attempts(3))
}

func goRetry(ctx context.Context, c *http.Client, body []byte) error {
	b := sethvargo.WithMaxRetries(3, sethvargo.NewConstant(time.Second))
	return sethvargo.Do(ctx, b, func(ctx context.Context) error {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "https://api.example.com/charges", bytes.NewReader(body))
		resp, err := c.Do(req) // want `POST retried by retry.Do without an Idempotency-Key`
		if err != nil {
			return sethvargo.RetryableError(err)
		}
		return resp.Body.Close()
	})
}

func keyPerAttempt(c *http.Client, body []byte) error {
	return avast.Do(func() error {
		req, _ := http.NewRequest(http.MethodPost, "https://api.example.com/charges", bytes.NewReader(body))
		req.Header.Set("Idempotency-Key", uuid.NewString()) // want `the Idempotency-Key is made anew on every attempt retry.Do makes`
		_, err := c.Do(req)
		return err
	})
}

// withRetry is a retry helper of the package's own: its loop calls op and
// waits.
func withRetry(attempts int, op func() error) error { // want withRetry:"retries its parameter 1"
	var err error
	for i := 0; i < attempts; i++ {
		if err = op(); err == nil {
			return nil
		}
		time.Sleep(time.Duration(i) * time.Second)
	}
	return err
}

// retrying hands its operation on to withRetry.
func retrying(op func() error) error { return withRetry(3, op) } // want retrying:"retries its parameter 0"

func ownHelper(c *http.Client, body []byte) error {
	return retrying(func() error {
		_, err := c.Post("https://api.example.com/charges", "application/json", bytes.NewReader(body)) // want `POST retried by retrying without an Idempotency-Key`
		return err
	})
}

package unsafe_helpers

import (
	"bytes"
	"context"
	"net/http"

	backoff4 "github.com/cenkalti/backoff/v4"

	"retryvettest/helpers/retrier"
)

// svc holds its retry helper in a field, set where it is made.
type svc struct {
	c     *http.Client
	retry func(backoff4.Operation, backoff4.BackOff) error
}

func newSvc(c *http.Client) *svc { return &svc{c: c, retry: backoff4.Retry} }

func (s *svc) charge(body []byte) error {
	return s.retry(func() error {
		resp, err := s.c.Post("https://api.example.com/charges", "application/json", bytes.NewReader(body)) // want `POST retried by retry without an Idempotency-Key`
		if err != nil {
			return err
		}
		return resp.Body.Close()
	}, backoff4.NewExponentialBackOff())
}

// retryDo is a package variable holding another package's helper.
var retryDo = retrier.Do

func refund(ctx context.Context, c *http.Client, body []byte) error {
	return retryDo(ctx, 3, func(ctx context.Context) error {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPatch, "https://api.example.com/refunds/1", bytes.NewReader(body))
		_, err := c.Do(req) // want `PATCH retried by retryDo without an Idempotency-Key`
		return err
	})
}

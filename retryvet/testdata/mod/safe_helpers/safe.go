// Package safe_helpers retries through helpers and function values safely:
// a key made once, idempotent methods, a helper that does not retry.
package safe_helpers

import (
	"bytes"
	"net/http"
	"time"

	backoff4 "github.com/cenkalti/backoff/v4"
	"github.com/google/uuid"
)

func keyedOnce(c *http.Client, body []byte) error {
	key := uuid.NewString()
	return backoff4.Retry(func() error {
		req, _ := http.NewRequest(http.MethodPost, "https://api.example.com/charges", bytes.NewReader(body))
		req.Header.Set("Idempotency-Key", key)
		_, err := c.Do(req)
		return err
	}, backoff4.NewExponentialBackOff())
}

func gets(c *http.Client) error {
	return backoff4.Retry(func() error {
		_, err := c.Get("https://api.example.com/health")
		return err
	}, backoff4.NewExponentialBackOff())
}

// once calls op once: not a retry helper.
func once(op func() error) error { return op() }

func notRetried(c *http.Client, body []byte) error {
	return once(func() error {
		_, err := c.Post("https://api.example.com/charges", "application/json", bytes.NewReader(body))
		return err
	})
}

// funcValueGET retries do: a retry helper too.
func funcValueGET(do func(*http.Request) (*http.Response, error)) { // want funcValueGET:"retries its parameter 0"
	for i := 0; i < 3; i++ {
		req, _ := http.NewRequest(http.MethodGet, "https://api.example.com/health", nil)
		if _, err := do(req); err == nil {
			return
		}
		time.Sleep(time.Second)
	}
}

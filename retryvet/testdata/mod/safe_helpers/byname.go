package safe_helpers

import (
	"bytes"
	"net/http"

	backoff4 "github.com/cenkalti/backoff/v4"
)

type keyedCharger struct {
	c    *http.Client
	body []byte
	key  string // made once, by whoever made the charger
}

func (k *keyedCharger) charge() error {
	req, _ := http.NewRequest(http.MethodPost, "https://api.example.com/charges", bytes.NewReader(k.body))
	req.Header.Set("Idempotency-Key", k.key)
	resp, err := k.c.Do(req)
	if err != nil {
		return err
	}
	return resp.Body.Close()
}

func keyedByName(k *keyedCharger) error {
	return backoff4.Retry(k.charge, backoff4.NewExponentialBackOff())
}

func (k *keyedCharger) health() error {
	resp, err := k.c.Get("https://api.example.com/health")
	if err != nil {
		return err
	}
	return resp.Body.Close()
}

func healthByName(k *keyedCharger) error {
	return backoff4.Retry(k.health, backoff4.NewExponentialBackOff())
}

// runner holds a helper that calls its operation once: no retry.
type runner struct{ run func(func() error) error }

func newRunner() *runner { return &runner{run: once} }

func (r *runner) post(c *http.Client, body []byte) error {
	return r.run(func() error {
		resp, err := c.Post("https://api.example.com/charges", "application/json", bytes.NewReader(body))
		if err != nil {
			return err
		}
		return resp.Body.Close()
	})
}

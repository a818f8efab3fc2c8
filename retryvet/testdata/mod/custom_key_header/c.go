// Package custom_key_header keys its POSTs with a header of its API's
// own, which -key-headers names.
package custom_key_header

import (
	"bytes"
	"net/http"
	"time"

	"github.com/google/uuid"
)

func dedupe(c *http.Client, body []byte) { // want dedupe:`sends a POST \(dedupe\)`
	key := uuid.NewString()
	for i := 0; i < 3; i++ {
		req, _ := http.NewRequest(http.MethodPost, "https://api.example.com/jobs", bytes.NewReader(body))
		req.Header.Set("X-Dedupe-Token", key)
		if resp, err := c.Do(req); err == nil { // want `POST retried by this loop without an Idempotency-Key`
			resp.Body.Close()
			return
		}
		time.Sleep(time.Second)
	}
}

// traced sets a request ID, which no server dedupes on.
func traced(c *http.Client, body []byte) { // want traced:`sends a POST \(traced\)`
	id := uuid.NewString()
	for i := 0; i < 3; i++ {
		req, _ := http.NewRequest(http.MethodPost, "https://api.example.com/jobs", bytes.NewReader(body))
		req.Header.Set("X-Request-Id", id)
		if resp, err := c.Do(req); err == nil { // want `POST retried by this loop without an Idempotency-Key`
			resp.Body.Close()
			return
		}
		time.Sleep(time.Second)
	}
}

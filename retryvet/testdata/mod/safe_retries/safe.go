// Package safe_retries holds what retryvet must not report.
package safe_retries

import (
	"bytes"
	"context"
	"net/http"
	"time"

	"github.com/google/uuid"
	"github.com/hashicorp/go-retryablehttp"
	resty3 "resty.dev/v3"
)

// A key set once, before the retries.
func retryableKeyed(c *retryablehttp.Client) {
	req, _ := retryablehttp.NewRequest("POST", "https://api.example.com/charges", nil)
	req.Header.Set("Idempotency-Key", uuid.NewString())
	c.Do(req)
}

// GET and PUT are safe to repeat.
func retryableGET(c *retryablehttp.Client) {
	req, _ := retryablehttp.NewRequest("GET", "https://api.example.com/charges", nil)
	c.Do(req)
	put, _ := retryablehttp.NewRequest(http.MethodPut, "https://api.example.com/charges/1", nil)
	c.Do(put)
}

// resty v3's default retries only idempotent methods.
func restyV3Default() { resty3.New().SetRetryCount(3).SetRetryAllowNonIdempotent(false) }

// A key made once, before the loop, sent on every attempt.
func handLoopKeyed(c *http.Client, body []byte) {
	key := uuid.NewString()
	for i := 0; i < 3; i++ {
		req, _ := http.NewRequest("POST", "https://api.example.com/charges", bytes.NewReader(body))
		req.Header.Set("Idempotency-Key", key)
		if _, err := c.Do(req); err == nil {
			return
		}
		time.Sleep(time.Second)
	}
}

// A loop that sends POSTs to different resources without waiting is not a
// retry loop.
func batch(c *http.Client, bodies [][]byte) {
	for _, b := range bodies {
		req, _ := http.NewRequest("POST", "https://api.example.com/items", bytes.NewReader(b))
		c.Do(req)
	}
}

// An endless loop bounded by its context.
func untilDone(ctx context.Context, c *http.Client) {
	for {
		req, _ := http.NewRequestWithContext(ctx, "GET", "https://api.example.com/health", nil)
		if resp, err := c.Do(req); err == nil {
			resp.Body.Close()
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
}

// An endless loop bounded by an attempt counter.
func counted(c *http.Client) {
	n := 0
	for {
		if resp, err := c.Get("https://api.example.com/health"); err == nil {
			resp.Body.Close()
			return
		}
		n++
		if n >= 5 {
			return
		}
		time.Sleep(time.Second)
	}
}

const headerKey = "Idempotency-Key"

// resty v3's non-idempotent retries, allowed only when the request
// carries a key the function checks for.
func restyWhenKeyed(r *http.Request, retries int) {
	if r.Header.Get(headerKey) == "" {
		return
	}
	resty3.New().SetRetryCount(retries).SetRetryAllowNonIdempotent(true)
}

// An endless loop bounded by the request's own context.
func untilRequestDone(c *http.Client, req *http.Request) { // want untilRequestDone:"sends its parameter 1 through its client 0"
	for {
		if resp, err := c.Do(req); err == nil {
			resp.Body.Close()
			return
		}
		select {
		case <-req.Context().Done():
			return
		case <-time.After(time.Second):
		}
	}
}

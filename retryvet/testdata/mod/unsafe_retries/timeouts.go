package unsafe_retries

import (
	"bytes"
	"context"
	"net/http"
	"time"
)

// growingTimeout gives each attempt a longer timeout: the same POST
// again, in another context.
func growingTimeout(c *http.Client, body []byte) error {
	var err error
	for attempt := 1; attempt <= 3; attempt++ {
		ctx, cancel := context.WithTimeout(context.Background(), time.Duration(attempt)*time.Second)
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "https://api.example.com/charges", bytes.NewReader(body))
		var resp *http.Response
		resp, err = c.Do(req) // want `POST retried by this loop without an Idempotency-Key`
		cancel()
		if err == nil {
			return resp.Body.Close()
		}
		time.Sleep(time.Second)
	}
	return err
}

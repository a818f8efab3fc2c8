package unsafe_helpers

import (
	"bytes"
	"net/http"
	"time"
)

// SendFunc is the shape SDK generators give a client's send: a named
// function type, not a func literal's type.
type SendFunc func(*http.Request) (*http.Response, error)

func namedSend(send SendFunc, body []byte) error { // want namedSend:"retries its parameter 0"
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		req, _ := http.NewRequest(http.MethodPost, "https://api.example.com/charges", bytes.NewReader(body))
		var resp *http.Response
		if resp, err = send(req); err == nil { // want `POST retried by this loop without an Idempotency-Key`
			resp.Body.Close()
			return nil
		}
		time.Sleep(time.Second)
	}
	return err
}

type namedClient struct{ send SendFunc }

func (c *namedClient) patch(body []byte) {
	for i := 0; i < 3; i++ {
		req, _ := http.NewRequest(http.MethodPatch, "https://api.example.com/orders/1", bytes.NewReader(body))
		if _, err := c.send(req); err == nil { // want `PATCH retried by this loop without an Idempotency-Key`
			return
		}
		time.Sleep(time.Second)
	}
}

// Package unsafe_heimdall sends POSTs and PATCHes with a heimdall client
// that retries: its Do sends every method again after an error or a 5xx.
package unsafe_heimdall

import (
	"bytes"
	"net/http"
	"time"

	"github.com/gojek/heimdall/v7"
	"github.com/gojek/heimdall/v7/httpclient"
)

func newClient() *httpclient.Client {
	return httpclient.NewClient(
		httpclient.WithRetryCount(3),
		httpclient.WithRetrier(heimdall.NewRetrier(heimdall.NewConstantBackoff(100*time.Millisecond, 50*time.Millisecond))),
	)
}

func charge(c *httpclient.Client, body []byte) error { // want charge:`sends a POST \(Post\)`
	resp, err := c.Post("https://api.example.com/charges", bytes.NewReader(body), nil) // want `POST retried by heimdall's httpclient without an Idempotency-Key`
	if err != nil {
		return err
	}
	return resp.Body.Close()
}

func patch(c *httpclient.Client, body []byte) error { // want patch:`sends a PATCH \(patch\)`
	req, _ := http.NewRequest(http.MethodPatch, "https://api.example.com/orders/1", bytes.NewReader(body))
	resp, err := c.Do(req) // want `PATCH retried by heimdall's httpclient without an Idempotency-Key`
	if err != nil {
		return err
	}
	return resp.Body.Close()
}

func get(c *httpclient.Client) error {
	resp, err := c.Get("https://api.example.com/charges/1", nil)
	if err != nil {
		return err
	}
	return resp.Body.Close()
}

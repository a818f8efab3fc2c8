// Package safe_heimdall_keyed retries POSTs with heimdall, each with an
// Idempotency-Key.
package safe_heimdall_keyed

import (
	"bytes"
	"net/http"

	"github.com/gojek/heimdall/v7/httpclient"
)

func retrying() *httpclient.Client { return httpclient.NewClient(httpclient.WithRetryCount(3)) }

func charge(c *httpclient.Client, key string, body []byte) error {
	resp, err := c.Post("https://api.example.com/charges", bytes.NewReader(body), http.Header{"Idempotency-Key": {key}})
	if err != nil {
		return err
	}
	return resp.Body.Close()
}

// Package safe_heimdall POSTs with a heimdall client that does not retry,
// and with one that retries a keyed request.
package safe_heimdall

import (
	"bytes"

	"github.com/gojek/heimdall/v7/httpclient"
)

func once() *httpclient.Client { return httpclient.NewClient(httpclient.WithRetryCount(0)) }

func charge(c *httpclient.Client, body []byte) error { // want charge:`sends a POST \(Post\)`
	resp, err := c.Post("https://api.example.com/charges", bytes.NewReader(body), nil)
	if err != nil {
		return err
	}
	return resp.Body.Close()
}

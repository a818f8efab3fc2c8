// Package keyedsdk's builder keys every request itself: its callers are
// not reported.
package keyedsdk

import (
	"github.com/google/uuid"
	"github.com/hashicorp/go-retryablehttp"
)

type Client struct{ rc *retryablehttp.Client }

func (c *Client) Send(method, path string) {
	req, _ := retryablehttp.NewRequest(method, "https://api.example.com"+path, nil)
	req.Header.Set("Idempotency-Key", uuid.NewString())
	c.rc.Do(req)
}

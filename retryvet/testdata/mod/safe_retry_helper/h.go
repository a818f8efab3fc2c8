// Package safe_retry_helper bounds its endless retry loop in a helper, as
// stripe-go does: the counter reaches the call that gates the break.
package safe_retry_helper

import (
	"net/http"
	"time"
)

type backend struct{ max int }

func (b *backend) shouldRetry(err error, resp *http.Response, n int) bool {
	return n < b.max && (err != nil || resp.StatusCode >= 500)
}

func (b *backend) get(c *http.Client) (*http.Response, error) {
	for retry := 0; ; {
		resp, err := c.Get("https://api.example.com/health")
		if !b.shouldRetry(err, resp, retry) {
			return resp, err
		}
		retry++
		time.Sleep(time.Second)
	}
}

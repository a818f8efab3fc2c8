// Package unsafe_any_method resends requests whatever their method, as an
// SDK's transport does: a loop given the request or its method, waiting
// through a function of its own, and go-retryablehttp's FromRequest of a
// request it is handed.
package unsafe_any_method

import (
	"context"
	"io"
	"net/http"
	"time"

	"github.com/hashicorp/go-retryablehttp"
)

type client struct {
	hc         *http.Client
	maxRetries int
}

// waitFor waits d, or until ctx is done.
func waitFor(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (c *client) doSingle(req *http.Request, auth bool) (*http.Response, error) { return c.hc.Do(req) }

// execute retries whatever request it is given.
func (c *client) execute(ctx context.Context, method, url string, body io.Reader) (*http.Response, error) {
	var resp *http.Response
	var err error
	for attempt := 0; attempt <= c.maxRetries; attempt++ {
		req, _ := http.NewRequestWithContext(ctx, method, url, body)
		if resp, err = c.doSingle(req, true); err == nil && resp.StatusCode < 500 { // want `this loop resends a request of whatever method it is given`
			return resp, nil
		}
		if err := waitFor(ctx, time.Duration(attempt)*time.Second); err != nil {
			return nil, err
		}
	}
	return resp, err
}

// perform retries the request it is handed through a RoundTripper.
func perform(rt http.RoundTripper, req *http.Request) (*http.Response, error) {
	var resp *http.Response
	var err error
	for i := 0; i < 3; i++ {
		if resp, err = rt.RoundTrip(req); err == nil { // want `this loop resends a request of whatever method it is given`
			return resp, nil
		}
		time.Sleep(time.Second)
	}
	return resp, err
}

// send hands any request to go-retryablehttp.
func send(c *retryablehttp.Client, req *http.Request) (*http.Response, error) {
	r, err := retryablehttp.FromRequest(req) // want `go-retryablehttp retries the request FromRequest wraps whatever its method`
	if err != nil {
		return nil, err
	}
	return c.Do(r)
}

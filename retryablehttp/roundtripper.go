package retryablehttp

import (
	"errors"
	"net/http"
	"net/url"
	"sync"
)

// RoundTripper is an http.RoundTripper that sends through a Client, for an
// *http.Client that retries. Like go-retryablehttp's, it is not a strict
// RoundTripper: it retries, and returns the Client's errors.
type RoundTripper struct {
	// Client sends the requests; nil means NewClient().
	Client *Client

	once sync.Once
}

// RoundTrip sends req through the Client. An error the Client's
// HTTPClient made (a *url.Error) is unwrapped, so that the http.Client
// above does not wrap it twice.
func (rt *RoundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	rt.once.Do(func() {
		if rt.Client == nil {
			rt.Client = NewClient()
		}
	})
	r, err := FromRequest(req)
	if err != nil {
		return nil, err
	}
	resp, err := rt.Client.Do(r)
	if _, ok := err.(*url.Error); ok {
		return resp, errors.Unwrap(err)
	}
	return resp, err
}

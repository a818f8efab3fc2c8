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
func (c *client) execute(ctx context.Context, method, url string, body io.Reader) (*http.Response, error) { // want execute:`sends a request of its parameter 1's method \(execute\)`
	var resp *http.Response
	var err error
	for attempt := 0; attempt <= c.maxRetries; attempt++ {
		req, _ := http.NewRequestWithContext(ctx, method, url, body)
		if resp, err = c.doSingle(req, true); err == nil && resp.StatusCode < 500 { // want `this loop resends a request whatever its method`
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
		if resp, err = rt.RoundTrip(req); err == nil { // want `this loop resends a request whatever its method`
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

// apiRequest is an SDK's request, whose method is known at run time.
type apiRequest interface{ Method() string }

// build makes a go-retryablehttp request of whatever method r has.
func build(r apiRequest, url string) (*retryablehttp.Request, error) {
	return retryablehttp.NewRequest(r.Method(), url, nil) // want `go-retryablehttp retries the request NewRequest makes whatever its method`
}

// api holds a go-retryablehttp client as a plain *http.Client.
type api struct{ hc *http.Client }

func newAPI() *api {
	return &api{hc: retryablehttp.NewClient().StandardClient()}
}

func (a *api) do(req *http.Request) (*http.Response, error) {
	return a.hc.Do(req) // want `go-retryablehttp retries the request sent through StandardClient\(\) whatever its method`
}

// response is an SDK's response, embedding the HTTP one.
type response struct {
	*http.Response
	Meta map[string]string
}

type handler interface {
	Do(req *http.Request, v any) (*response, error)
}

// retry resends the request through a handler whose result embeds the
// response.
func retry(h handler, req *http.Request, v any) (*response, error) {
	for retries := 0; ; retries++ {
		resp, err := h.Do(req.Clone(req.Context()), v) // want `this loop resends a request whatever its method`
		if err == nil || retries >= 3 {
			return resp, err
		}
		select {
		case <-req.Context().Done():
			return resp, err
		case <-time.After(time.Duration(retries) * time.Second):
		}
	}
}

// sdk keeps a go-retryablehttp StandardClient() in a field, and sends
// through a helper that is given the client, as godo does.
type sdk struct{ HTTPClient *http.Client }

func newSDK() *sdk {
	return &sdk{HTTPClient: retryablehttp.NewClient().StandardClient()}
}

// DoRequestWithClient sends req through client.
func DoRequestWithClient(ctx context.Context, client *http.Client, req *http.Request) (*http.Response, error) { // want DoRequestWithClient:"sends its parameter 2 through its client 1"
	req = req.WithContext(ctx)
	return client.Do(req)
}

func (s *sdk) do(ctx context.Context, req *http.Request) (*http.Response, error) {
	return DoRequestWithClient(ctx, s.HTTPClient, req) // want `go-retryablehttp retries the request sent through StandardClient\(\) \(by DoRequestWithClient\) whatever its method`
}

func (s *sdk) createDroplet(ctx context.Context) (*http.Response, error) { // want createDroplet:`sends a POST \(createDroplet\)`
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "https://api.example.com/droplets", nil)
	return DoRequestWithClient(ctx, s.HTTPClient, req) // want `POST retried by go-retryablehttp through StandardClient\(\) \(by DoRequestWithClient\) without an Idempotency-Key`
}

// plain sends through a client that does not retry: nothing to report.
func plain(ctx context.Context, req *http.Request) (*http.Response, error) {
	return DoRequestWithClient(ctx, http.DefaultClient, req)
}

// describe reads the SDK request's Method, not the HTTP request's: it
// checks nothing about what is resent.
func describe(r apiRequest) string { return r.Method() }

// performAPI resends whatever request it is given; the only Method it reads
// is the SDK's, to log it.
func performAPI(rt http.RoundTripper, r apiRequest, req *http.Request) (*http.Response, error) {
	var resp *http.Response
	var err error
	for i := 0; i < 3; i++ {
		_ = describe(r)
		if resp, err = rt.RoundTrip(req); err == nil { // want `this loop resends a request whatever its method`
			return resp, nil
		}
		time.Sleep(time.Second)
	}
	return resp, err
}

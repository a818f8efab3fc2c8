package retryablehttp

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/retryhttp/retryhttp"
)

// NewClient's defaults, go-retryablehttp's.
const (
	defaultRetryWaitMin = 1 * time.Second
	defaultRetryWaitMax = 30 * time.Second
	defaultRetryMax     = 4
)

// Client sends requests with retries. Its fields are read on every call,
// so they may be set after NewClient and before the first.
type Client struct {
	HTTPClient *http.Client // sends each attempt; nil means a pooled client of its own
	Logger     any          // a Logger or a LeveledLogger; nil logs nothing

	RetryWaitMin time.Duration // the Backoff's min
	RetryWaitMax time.Duration // the Backoff's max
	RetryMax     int           // retries after the first attempt

	RequestLogHook  RequestLogHook  // before each attempt
	ResponseLogHook ResponseLogHook // after each response

	CheckRetry   CheckRetry   // whether to retry; nil means DefaultRetryPolicy
	Backoff      Backoff      // how long to wait; nil means DefaultBackoff
	ErrorHandler ErrorHandler // what a failure returns; nil means an error
	PrepareRetry PrepareRetry // called with each retry's request

	loggerInit sync.Once
	clientInit sync.Once
	transport  *retryhttp.Transport
}

// NewClient returns a Client with go-retryablehttp's defaults: 4 retries,
// waits from 1s doubling up to 30s, DefaultRetryPolicy, DefaultBackoff, and
// a logger on standard error.
func NewClient() *Client {
	return &Client{
		HTTPClient:   pooledClient(),
		Logger:       defaultLogger,
		RetryWaitMin: defaultRetryWaitMin,
		RetryWaitMax: defaultRetryWaitMax,
		RetryMax:     defaultRetryMax,
		CheckRetry:   DefaultRetryPolicy,
		Backoff:      DefaultBackoff,
	}
}

// pooledClient is a client with a transport of its own that keeps as many
// idle connections per host as there are processors, plus one: a Client
// called from many goroutines reuses its connections.
func pooledClient() *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = runtime.GOMAXPROCS(0) + 1
	return &http.Client{Transport: t}
}

func (c *Client) logger() any {
	c.loggerInit.Do(func() {
		switch c.Logger.(type) {
		case nil, Logger, LeveledLogger:
		default:
			panic(fmt.Sprintf("invalid logger type passed, must be Logger or LeveledLogger, was %T", c.Logger))
		}
	})
	return c.Logger
}

// init sets the default HTTPClient and builds the Transport every call of
// the Client goes through: each attempt is sent by HTTPClient.Do, the
// Client's CheckRetry decides, its Backoff waits, and the Client's hooks
// and logs are called from the Transport's own.
func (c *Client) init() {
	if c.HTTPClient == nil {
		c.HTTPClient = pooledClient()
	}
	c.transport = &retryhttp.Transport{
		Base:                 sendFunc(sendAttempt),
		InjectIdempotencyKey: true,
		Budget:               retryhttp.NoBudget, // go-retryablehttp retries as CheckRetry says
		ShouldRetry:          shouldRetry,
		Backoff:              backoff,
		BeforeAttempt:        beforeAttempt,
		Logger:               slog.New(slog.DiscardHandler), // the Client logs in its own words
		Hooks:                []retryhttp.Hook{retryhttp.HookFunc(observe)},
	}
}

// Do sends req, retrying as CheckRetry decides, and returns what
// go-retryablehttp's Do returns.
func (c *Client) Do(req *Request) (*http.Response, error) {
	c.clientInit.Do(c.init)
	logger := c.logger()
	logf(logger, true, "performing request", []any{"method", req.Method, "url", redactURL(req.URL)},
		"[DEBUG] %s %s", req.Method, redactURL(req.URL))

	cl := &call{c: c, req: req, logger: logger, checkRetry: c.CheckRetry, backoff: c.Backoff}
	if cl.checkRetry == nil {
		cl.checkRetry = DefaultRetryPolicy
	}
	if cl.backoff == nil {
		cl.backoff = DefaultBackoff
	}
	ctx := req.Context()
	policy := retryhttp.Policy{
		MaxAttempts:        max(c.RetryMax, 0) + 1,
		MaxElapsed:         1<<63 - 1, // go-retryablehttp bounds the attempts, not the time
		RetryNonIdempotent: true,      // CheckRetry decides for every method
	}
	hreq := req.Request.WithContext(context.WithValue(retryhttp.WithPolicy(ctx, policy), callKey{}, cl))
	hreq.Body, hreq.GetBody = nil, nil
	if req.body != nil {
		body, err := readCloser(req.body())
		if err != nil {
			return nil, err
		}
		hreq.Body = body
		hreq.GetBody = func() (io.ReadCloser, error) {
			cl.waiting = false
			body, err := readCloser(req.body())
			if err != nil {
				cl.bodyErr = err
			}
			return body, err
		}
	}

	resp, err := c.transport.RoundTrip(hreq)
	if cl.attempts == 0 && cl.bodyErr == nil && cl.prepareErr == nil {
		return nil, err // refused before a send (a nil URL)
	}
	if resp != nil && resp != cl.resp {
		resp.Body.Close() // not HTTPClient's own: none is kept but the last
		resp = nil
	}
	if resp != nil {
		resp.Request = cl.respRequest
	}
	return cl.end(ctx, resp)
}

// callKey is the context key of a call's state.
type callKey struct{}

// call is the state of one Do, shared by the Transport's functions through
// the request's context.
type call struct {
	c          *Client
	req        *Request
	logger     any
	checkRetry CheckRetry
	backoff    Backoff

	attempts    int            // sent so far
	resp        *http.Response // the last attempt's, as HTTPClient.Do returned it
	respRequest *http.Request  // its Request, before the Transport makes it the caller's
	doErr       error          // the last attempt's, as HTTPClient.Do returned it
	respErr     error          // the response handler's
	checkErr    error          // CheckRetry's
	prepareErr  error          // PrepareRetry's
	bodyErr     error          // the body function's, for a retry
	retry       bool           // CheckRetry's last verdict
	waiting     bool           // a retry was decided and its attempt not yet begun
	deadline    bool           // the Transport would not wait past the context's deadline
	hookHeader  http.Header    // what RequestLogHook and PrepareRetry set (nil: deleted) in the caller's header so far
}

// noteHeader keeps the changes RequestLogHook or PrepareRetry made to the
// caller's header, from before to after, for this attempt and the ones
// after it.
func (cl *call) noteHeader(before, after http.Header) {
	note := func(k string, v []string) {
		if cl.hookHeader == nil {
			cl.hookHeader = http.Header{}
		}
		cl.hookHeader[k] = v
	}
	for k, v := range after {
		if !slices.Equal(before[k], v) {
			note(k, slices.Clone(v))
		}
	}
	for k := range before {
		if _, ok := after[k]; !ok {
			note(k, nil)
		}
	}
}

func callOf(ctx context.Context) *call {
	cl, _ := ctx.Value(callKey{}).(*call)
	return cl
}

// sendFunc makes a function an http.RoundTripper.
type sendFunc func(*http.Request) (*http.Response, error)

func (f sendFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// sendAttempt sends one attempt through HTTPClient.Do, after
// RequestLogHook.
func sendAttempt(r *http.Request) (*http.Response, error) {
	cl := callOf(r.Context())
	i := cl.attempts
	cl.attempts++
	cl.waiting = false
	cl.resp, cl.respRequest, cl.doErr, cl.respErr = nil, nil, nil, nil
	if h := cl.c.RequestLogHook; h != nil {
		// As go-retryablehttp does, the hook is given the caller's request
		// itself, so that what it writes there stays for the attempts
		// after; the changes to its header are carried onto this attempt's.
		// Its Body is this attempt's, as go-retryablehttp rewinds it
		// before the hook.
		before := cl.req.Request.Header.Clone()
		cl.req.Request.Body = r.Body
		h(hookLogger(cl.logger), cl.req.Request, i)
		r.Body = cl.req.Request.Body
		cl.noteHeader(before, cl.req.Request.Header)
	}
	if len(cl.hookHeader) > 0 {
		r.Header = r.Header.Clone() // the Transport's, shared by the call's attempts
		for k, v := range cl.hookHeader {
			if v == nil {
				delete(r.Header, k)
			} else {
				r.Header[k] = v
			}
		}
	}
	resp, err := cl.c.HTTPClient.Do(r)
	cl.resp, cl.doErr = resp, err
	if resp != nil {
		// The caller's request, as go-retryablehttp returns it; a
		// redirect's when HTTPClient followed one.
		cl.respRequest = resp.Request
		if resp.Request == r {
			cl.respRequest = cl.req.Request
		}
	}
	if err != nil {
		return nil, err // a response beside an error (a CheckRedirect's) is closed already
	}
	return resp, nil
}

// shouldRetry asks CheckRetry (and the response handler) about the
// attempt, as go-retryablehttp does, and logs it.
func shouldRetry(r *http.Request, _ *http.Response, _ error) (retryhttp.Decision, error) {
	cl := callOf(r.Context())
	ctx := cl.req.Context()
	cl.retry, cl.checkErr = cl.checkRetry(ctx, cl.resp, cl.doErr)
	if !cl.retry && cl.doErr == nil && cl.req.responseHandler != nil {
		cl.respErr = cl.req.responseHandler(cl.resp)
		cl.retry, cl.checkErr = cl.checkRetry(ctx, cl.resp, cl.respErr)
	}
	err := cl.doErr
	if cl.respErr != nil {
		err = cl.respErr
	}
	if err != nil {
		logf(cl.logger, false, "request failed", []any{"error", err, "method", cl.req.Method, "url", redactURL(cl.req.URL)},
			"[ERR] %s %s request failed: %v", cl.req.Method, redactURL(cl.req.URL), err)
	} else if h := cl.c.ResponseLogHook; h != nil {
		h(hookLogger(cl.logger), cl.resp)
	}
	if cl.retry {
		return retryhttp.DecisionRetry, nil
	}
	return retryhttp.DecisionStop, nil
}

// backoff is the Client's Backoff for the retry after attempt n, given
// HTTPClient's response.
func backoff(r *http.Request, n int, _ *http.Response) time.Duration {
	cl := callOf(r.Context())
	return cl.backoff(cl.c.RetryWaitMin, cl.c.RetryWaitMax, n-1, cl.resp)
}

// beforeAttempt calls PrepareRetry with each retry's request: the
// caller's, as go-retryablehttp gives it.
func beforeAttempt(r *http.Request) error {
	cl := callOf(r.Context())
	cl.waiting = false
	if retryhttp.AttemptFromContext(r.Context()) <= 1 || cl.c.PrepareRetry == nil {
		return nil
	}
	// The caller's request, as for RequestLogHook: its header's changes
	// carry onto this attempt and the ones after it.
	before := cl.req.Request.Header.Clone()
	err := cl.c.PrepareRetry(cl.req.Request)
	cl.noteHeader(before, cl.req.Request.Header)
	if err != nil {
		cl.prepareErr = err
		return err
	}
	return nil
}

// observe logs each retry as go-retryablehttp does, and notes a wait the
// Transport would not start.
func observe(ctx context.Context, e retryhttp.Event) {
	cl := callOf(ctx)
	if cl == nil || e.Kind != retryhttp.EventRetry && !(e.Kind == retryhttp.EventGiveUp && e.GiveUp == retryhttp.ReasonDeadline) {
		return
	}
	cl.waiting = true
	cl.deadline = e.Kind == retryhttp.EventGiveUp
	remain := cl.c.RetryMax - (e.Attempt - 1)
	desc := fmt.Sprintf("%s %s", cl.req.Method, redactURL(cl.req.URL))
	if cl.resp != nil {
		desc = fmt.Sprintf("%s (status: %d)", desc, cl.resp.StatusCode)
	}
	logf(cl.logger, true, "retrying request", []any{"request", desc, "timeout", e.Wait, "remaining", remain},
		"[DEBUG] %s: retrying in %s (%d left)", desc, e.Wait, remain)
}

// end makes what Do returns of the call's last state: resp, the last
// response if the Transport returned it.
func (cl *call) end(ctx context.Context, resp *http.Response) (*http.Response, error) {
	if cl.waiting && (ctx.Err() != nil || cl.deadline) {
		// The context ended during a wait, or would have: go-retryablehttp
		// returns its error, nothing else.
		if resp != nil {
			resp.Body.Close()
		}
		<-ctx.Done()
		cl.c.HTTPClient.CloseIdleConnections()
		return nil, ctx.Err()
	}
	if cl.bodyErr != nil {
		cl.c.HTTPClient.CloseIdleConnections()
		return resp, cl.bodyErr
	}
	if cl.doErr == nil && cl.respErr == nil && cl.checkErr == nil && cl.prepareErr == nil && !cl.retry {
		return resp, nil
	}
	defer cl.c.HTTPClient.CloseIdleConnections()
	err := cl.doErr
	switch {
	case cl.prepareErr != nil:
		err = cl.prepareErr
	case cl.checkErr != nil:
		err = cl.checkErr
	case cl.respErr != nil:
		err = cl.respErr
	}
	if resp == nil {
		resp = cl.resp // HTTPClient's last, if any, its body closed
	}
	if cl.c.ErrorHandler != nil {
		return cl.c.ErrorHandler(resp, err, cl.attempts)
	}
	if resp != nil {
		drain(cl.logger, resp.Body)
	}
	if err == nil {
		return nil, fmt.Errorf("%s %s giving up after %d attempt(s)", cl.req.Method, redactURL(cl.req.URL), cl.attempts)
	}
	return nil, fmt.Errorf("%s %s giving up after %d attempt(s): %w", cl.req.Method, redactURL(cl.req.URL), cl.attempts, err)
}

// drain reads a little of a body so that its connection is reused, and
// closes it; a read error is logged.
func drain(logger any, body io.ReadCloser) {
	defer body.Close()
	if _, err := io.Copy(io.Discard, io.LimitReader(body, 4096)); err != nil {
		logf(logger, false, "error reading response body", []any{"error", err}, "[ERR] error reading response body: %v", err)
	}
}

// redactURL is u with any password replaced by "xxxxx", as logs and errors
// print it.
func redactURL(u *url.URL) string {
	if u == nil {
		return ""
	}
	r := *u
	if _, ok := r.User.Password(); ok {
		r.User = url.UserPassword(r.User.Username(), "xxxxx")
	}
	return r.String()
}

// Get sends a GET with a Client of the package's own.
func Get(url string) (*http.Response, error) { return defaultClient.Get(url) }

// Head sends a HEAD with a Client of the package's own.
func Head(url string) (*http.Response, error) { return defaultClient.Head(url) }

// Post sends a POST of body (of a type NewRequest takes) with the
// Content-Type bodyType, with a Client of the package's own.
func Post(url, bodyType string, body any) (*http.Response, error) {
	return defaultClient.Post(url, bodyType, body)
}

// PostForm posts data as a form with a Client of the package's own.
func PostForm(url string, data url.Values) (*http.Response, error) {
	return defaultClient.PostForm(url, data)
}

// defaultClient is the package functions' Client, unexported so that
// nobody changes it under the others.
var defaultClient = NewClient()

// Get sends a GET.
func (c *Client) Get(url string) (*http.Response, error) {
	req, err := NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	return c.Do(req)
}

// Head sends a HEAD.
func (c *Client) Head(url string) (*http.Response, error) {
	req, err := NewRequest(http.MethodHead, url, nil)
	if err != nil {
		return nil, err
	}
	return c.Do(req)
}

// Post sends a POST of body (of a type NewRequest takes) with the
// Content-Type bodyType.
func (c *Client) Post(url, bodyType string, body any) (*http.Response, error) {
	req, err := NewRequest(http.MethodPost, url, body)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", bodyType)
	return c.Do(req)
}

// PostForm posts data as a form.
func (c *Client) PostForm(url string, data url.Values) (*http.Response, error) {
	return c.Post(url, "application/x-www-form-urlencoded", strings.NewReader(data.Encode()))
}

// StandardClient returns an *http.Client that sends through c, for code
// that takes a plain client.
func (c *Client) StandardClient() *http.Client {
	return &http.Client{Transport: &RoundTripper{Client: c}}
}

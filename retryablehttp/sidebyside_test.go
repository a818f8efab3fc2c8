package retryablehttp_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	upstream "github.com/hashicorp/go-retryablehttp"

	ours "github.com/retryhttp/retryhttp/retryablehttp"
)

// The side-by-side tests run one scenario through go-retryablehttp v0.7.8
// and through this package, each against a server of its own with the same
// script, and compare what the servers saw and what the callers got.

// step is what the scripted server does with one request.
type step struct {
	status int
	header http.Header
	hangup bool          // close the connection without a response
	delay  time.Duration // before answering
}

func status(code int) step { return step{status: code} }

var hangup = step{hangup: true}

// server answers request i with script[i], repeating the last step, and
// records each request's method, body and Idempotency-Key.
type server struct {
	*httptest.Server
	mu    sync.Mutex
	seen  []string
	keys  []string
	steps []step
}

func newServer(t *testing.T, steps ...step) *server {
	s := &server{steps: steps}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		s.seen = append(s.seen, r.Method+" "+string(b))
		s.keys = append(s.keys, r.Header.Get("Idempotency-Key"))
		st := s.steps[min(len(s.seen), len(s.steps))-1]
		s.mu.Unlock()
		if st.delay > 0 {
			select {
			case <-time.After(st.delay):
			case <-r.Context().Done():
				return
			}
		}
		if st.hangup {
			conn, _, _ := w.(http.Hijacker).Hijack()
			conn.Close()
			return
		}
		for k, v := range st.header {
			w.Header()[k] = v
		}
		w.WriteHeader(st.status)
		fmt.Fprintf(w, "answer %d", len(s.seen))
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *server) requests() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.seen...)
}

// scenario is one call and the Client settings it runs with; the func
// fields are built for each package by the same constructors, so both run
// the same code.
type scenario struct {
	name     string
	steps    []step
	method   string
	body     func() any // a fresh body of a type NewRequest takes
	retryMax int
	timeout  time.Duration // the request's context
	client   time.Duration // HTTPClient.Timeout
	check    string        // "", "propagated", "refuse" (false, err), "always" (true, err)
	backoff  string        // "" (a constant 1ms), "default", "linear"
	errors   string        // "", "passthrough", "count"
	prepare  string        // "", "header", "fail"
	handler  string        // "", "fail-once"
}

// outcome is what a run saw, in a form the two packages share.
type outcome struct {
	Requests []string
	Status   int
	Body     string
	Err      string
	Canceled bool // errors.Is(err, context.DeadlineExceeded)
	Hooks    []string
	Logs     []string
}

var errRefused = errors.New("refused by CheckRetry")

func (sc scenario) checkRetry(def func(context.Context, *http.Response, error) (bool, error)) func(context.Context, *http.Response, error) (bool, error) {
	switch sc.check {
	case "refuse":
		return func(context.Context, *http.Response, error) (bool, error) { return false, errRefused }
	case "always":
		return func(context.Context, *http.Response, error) (bool, error) { return true, errRefused }
	}
	return def
}

func (sc scenario) backoffFunc(def func(time.Duration, time.Duration, int, *http.Response) time.Duration, hooks *[]string) func(time.Duration, time.Duration, int, *http.Response) time.Duration {
	return func(min, max time.Duration, n int, resp *http.Response) time.Duration {
		code := 0
		if resp != nil {
			code = resp.StatusCode
		}
		*hooks = append(*hooks, fmt.Sprintf("backoff %v %v %d %d", min, max, n, code))
		if sc.backoff == "" {
			return time.Millisecond
		}
		return def(min, max, n, resp)
	}
}

func (sc scenario) errorHandler(hooks *[]string) func(*http.Response, error, int) (*http.Response, error) {
	switch sc.errors {
	case "passthrough":
		return upstream.PassthroughErrorHandler
	case "count":
		return func(resp *http.Response, err error, n int) (*http.Response, error) {
			code := 0
			if resp != nil {
				code = resp.StatusCode
				resp.Body.Close()
			}
			*hooks = append(*hooks, fmt.Sprintf("errorHandler %d %v %d", code, err, n))
			return nil, fmt.Errorf("handled after %d", n)
		}
	}
	return nil
}

func (sc scenario) prepareRetry(hooks *[]string) func(*http.Request) error {
	switch sc.prepare {
	case "header":
		return func(r *http.Request) error {
			*hooks = append(*hooks, "prepare "+r.Method)
			r.Header.Set("X-Signed", "again")
			return nil
		}
	case "fail":
		return func(*http.Request) error { return errors.New("cannot sign") }
	}
	return nil
}

func (sc scenario) responseHandler() func(*http.Response) error {
	if sc.handler != "fail-once" {
		return nil
	}
	calls := 0
	return func(resp *http.Response) error {
		calls++
		if calls == 1 {
			return errors.New("the answer does not parse")
		}
		return nil
	}
}

func (sc scenario) context() (context.Context, context.CancelFunc) {
	if sc.timeout > 0 {
		return context.WithTimeout(context.Background(), sc.timeout)
	}
	return context.WithCancel(context.Background())
}

func (sc scenario) methodOrGET() string {
	if sc.method == "" {
		return http.MethodGet
	}
	return sc.method
}

func (sc scenario) rawBody() any {
	if sc.body == nil {
		return nil
	}
	return sc.body()
}

// finish reads what a call returned.
func finish(out *outcome, s *server, resp *http.Response, err error) outcome {
	if err != nil {
		out.Err = err.Error()
		out.Canceled = errors.Is(err, context.DeadlineExceeded)
	}
	if resp != nil {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		out.Status, out.Body = resp.StatusCode, string(b)
	}
	out.Requests = s.requests()
	url := strings.NewReplacer(s.URL, "URL")
	out.Err = url.Replace(out.Err)
	for _, lines := range [][]string{out.Logs, out.Hooks} {
		for i, l := range lines {
			lines[i] = url.Replace(l)
		}
	}
	return *out
}

// printfLog is a Logger that keeps its lines.
type printfLog struct{ lines *[]string }

func (l printfLog) Printf(format string, args ...any) {
	*l.lines = append(*l.lines, fmt.Sprintf(format, args...))
}

func runUpstream(t *testing.T, sc scenario) outcome {
	s := newServer(t, sc.steps...)
	var out outcome
	c := upstream.NewClient()
	c.HTTPClient.Timeout = sc.client
	c.Logger = printfLog{&out.Logs}
	c.RetryMax, c.RetryWaitMin, c.RetryWaitMax = sc.retryMax, time.Millisecond, 4*time.Millisecond
	c.CheckRetry = sc.checkRetry(upstream.ErrorPropagatedRetryPolicy)
	if sc.check == "" {
		c.CheckRetry = upstream.DefaultRetryPolicy
	}
	def := upstream.DefaultBackoff
	if sc.backoff == "linear" {
		def = upstream.LinearJitterBackoff
	}
	c.Backoff = sc.backoffFunc(def, &out.Hooks)
	c.ErrorHandler = sc.errorHandler(&out.Hooks)
	c.PrepareRetry = sc.prepareRetry(&out.Hooks)
	c.RequestLogHook = func(_ upstream.Logger, r *http.Request, i int) {
		out.Hooks = append(out.Hooks, fmt.Sprintf("request %d %s", i, r.Header.Get("X-Signed")))
	}
	c.ResponseLogHook = func(_ upstream.Logger, resp *http.Response) {
		out.Hooks = append(out.Hooks, fmt.Sprintf("response %d", resp.StatusCode))
	}
	ctx, cancel := sc.context()
	defer cancel()
	req, err := upstream.NewRequestWithContext(ctx, sc.methodOrGET(), s.URL+"/x", sc.rawBody())
	if err != nil {
		t.Fatal(err)
	}
	if h := sc.responseHandler(); h != nil {
		req.SetResponseHandler(h)
	}
	resp, err := c.Do(req)
	return finish(&out, s, resp, err)
}

func runOurs(t *testing.T, sc scenario) (outcome, []string) {
	s := newServer(t, sc.steps...)
	var out outcome
	c := ours.NewClient()
	c.HTTPClient.Timeout = sc.client
	c.Logger = printfLog{&out.Logs}
	c.RetryMax, c.RetryWaitMin, c.RetryWaitMax = sc.retryMax, time.Millisecond, 4*time.Millisecond
	c.CheckRetry = sc.checkRetry(ours.ErrorPropagatedRetryPolicy)
	if sc.check == "" {
		c.CheckRetry = ours.DefaultRetryPolicy
	}
	def := ours.DefaultBackoff
	if sc.backoff == "linear" {
		def = ours.LinearJitterBackoff
	}
	c.Backoff = sc.backoffFunc(def, &out.Hooks)
	c.ErrorHandler = sc.errorHandler(&out.Hooks)
	c.PrepareRetry = sc.prepareRetry(&out.Hooks)
	c.RequestLogHook = func(_ ours.Logger, r *http.Request, i int) {
		out.Hooks = append(out.Hooks, fmt.Sprintf("request %d %s", i, r.Header.Get("X-Signed")))
	}
	c.ResponseLogHook = func(_ ours.Logger, resp *http.Response) {
		out.Hooks = append(out.Hooks, fmt.Sprintf("response %d", resp.StatusCode))
	}
	ctx, cancel := sc.context()
	defer cancel()
	req, err := ours.NewRequestWithContext(ctx, sc.methodOrGET(), s.URL+"/x", sc.rawBody())
	if err != nil {
		t.Fatal(err)
	}
	if h := sc.responseHandler(); h != nil {
		req.SetResponseHandler(h)
	}
	resp, err := c.Do(req)
	return finish(&out, s, resp, err), s.keys
}

// sameOutcome compares two runs.
func sameOutcome(t *testing.T, theirs, mine outcome) {
	t.Helper()
	if fmt.Sprintf("%+v", theirs) != fmt.Sprintf("%+v", mine) {
		t.Errorf("go-retryablehttp:\n  %+v\nthis package:\n  %+v", theirs, mine)
	}
}

// What a RequestLogHook and a PrepareRetry write in the request's header
// stays for the attempts after (they are given the caller's request, as
// go-retryablehttp gives it), a header one deletes is sent no more, and
// resp.Request is the request the caller's Request embeds, or the
// redirect's request when HTTPClient followed one: the same in both
// packages.
func TestHookHeadersAndResponseRequestSideBySide(t *testing.T) {
	for _, redirect := range []bool{false, true} {
		t.Run(fmt.Sprint("redirect=", redirect), func(t *testing.T) {
			type seen struct {
				headers  []string // per request: its X- headers
				same     bool     // resp.Request == the *http.Request the caller's Request embeds
				respPath string
				after    string // the caller's X- headers after Do
			}
			run := func(do func(*http.Request, func(*http.Request, int), func(*http.Request)) (*http.Response, *http.Request, error)) seen {
				var mu sync.Mutex
				var s seen
				n := 0
				srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					mu.Lock()
					s.headers = append(s.headers, xHeaders(r.Header))
					n++
					k := n
					mu.Unlock()
					if redirect && r.URL.Path == "/a" {
						http.Redirect(w, r, "/b", http.StatusFound)
						return
					}
					if k < 4+boolInt(redirect)*3 {
						w.WriteHeader(http.StatusServiceUnavailable)
						return
					}
					w.WriteHeader(http.StatusOK)
				}))
				defer srv.Close()
				req, err := http.NewRequest(http.MethodGet, srv.URL+"/a", nil)
				if err != nil {
					t.Fatal(err)
				}
				req.Header.Set("X-Gone", "at the third attempt")
				hook := func(r *http.Request, i int) {
					r.Header.Set(fmt.Sprint("X-Attempt-", i), "seen")
					if i == 2 {
						r.Header.Del("X-Gone")
					}
				}
				prepare := func(r *http.Request) { r.Header.Add("X-Prepared", "once more") }
				resp, embedded, err := do(req, hook, prepare)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				s.same, s.respPath, s.after = resp.Request == embedded, resp.Request.URL.Path, xHeaders(embedded.Header)
				return s
			}
			theirs := run(func(req *http.Request, hook func(*http.Request, int), prepare func(*http.Request)) (*http.Response, *http.Request, error) {
				c := upstream.NewClient()
				c.Logger, c.RetryMax, c.RetryWaitMin, c.RetryWaitMax = nil, 5, time.Millisecond, time.Millisecond
				c.RequestLogHook = func(_ upstream.Logger, r *http.Request, i int) { hook(r, i) }
				c.PrepareRetry = func(r *http.Request) error { prepare(r); return nil }
				rr, err := upstream.FromRequest(req)
				if err != nil {
					return nil, nil, err
				}
				resp, err := c.Do(rr)
				return resp, rr.Request, err
			})
			mine := run(func(req *http.Request, hook func(*http.Request, int), prepare func(*http.Request)) (*http.Response, *http.Request, error) {
				c := ours.NewClient()
				c.Logger, c.RetryMax, c.RetryWaitMin, c.RetryWaitMax = nil, 5, time.Millisecond, time.Millisecond
				c.RequestLogHook = func(_ ours.Logger, r *http.Request, i int) { hook(r, i) }
				c.PrepareRetry = func(r *http.Request) error { prepare(r); return nil }
				rr, err := ours.FromRequest(req)
				if err != nil {
					return nil, nil, err
				}
				resp, err := c.Do(rr)
				return resp, rr.Request, err
			})
			if fmt.Sprintf("%+v", theirs) != fmt.Sprintf("%+v", mine) {
				t.Errorf("go-retryablehttp:\n  %+v\nthis package:\n  %+v", theirs, mine)
			}
			if !redirect && !mine.same {
				t.Error("resp.Request is not the request the caller's Request embeds")
			}
		})
	}
}

// xHeaders is h's X- headers, sorted, as one string.
func xHeaders(h http.Header) string {
	var out []string
	for k, v := range h {
		if strings.HasPrefix(k, "X-") {
			out = append(out, k+"="+strings.Join(v, ","))
		}
	}
	slices.Sort(out)
	return strings.Join(out, " ")
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// A RequestLogHook that reads the request's body (to log it) and puts it
// back reads the body of each attempt, and the server gets it whole: the
// same in both packages.
func TestHookReadsTheBodySideBySide(t *testing.T) {
	type seen struct{ Hook, Server []string }
	run := func(newClient func(hook func(*http.Request)) func(*http.Request) (*http.Response, error)) seen {
		var mu sync.Mutex
		var s seen
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			mu.Lock()
			s.Server = append(s.Server, string(b))
			n := len(s.Server)
			mu.Unlock()
			if n < 3 {
				w.WriteHeader(http.StatusServiceUnavailable)
			}
		}))
		defer srv.Close()
		do := newClient(func(r *http.Request) {
			b, err := io.ReadAll(r.Body)
			if err != nil {
				t.Error(err)
			}
			mu.Lock()
			s.Hook = append(s.Hook, string(b))
			mu.Unlock()
			r.Body = io.NopCloser(strings.NewReader(string(b)))
		})
		req, err := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader("payload"))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return s
	}
	theirs := run(func(hook func(*http.Request)) func(*http.Request) (*http.Response, error) {
		c := upstream.NewClient()
		c.Logger, c.RetryMax, c.RetryWaitMin, c.RetryWaitMax = nil, 3, time.Millisecond, time.Millisecond
		c.RequestLogHook = func(_ upstream.Logger, r *http.Request, _ int) { hook(r) }
		return func(req *http.Request) (*http.Response, error) {
			rr, err := upstream.FromRequest(req)
			if err != nil {
				return nil, err
			}
			return c.Do(rr)
		}
	})
	mine := run(func(hook func(*http.Request)) func(*http.Request) (*http.Response, error) {
		c := ours.NewClient()
		c.Logger, c.RetryMax, c.RetryWaitMin, c.RetryWaitMax = nil, 3, time.Millisecond, time.Millisecond
		c.RequestLogHook = func(_ ours.Logger, r *http.Request, _ int) { hook(r) }
		return func(req *http.Request) (*http.Response, error) {
			rr, err := ours.FromRequest(req)
			if err != nil {
				return nil, err
			}
			return c.Do(rr)
		}
	})
	if fmt.Sprintf("%+v", theirs) != fmt.Sprintf("%+v", mine) {
		t.Errorf("go-retryablehttp:\n  %+v\nthis package:\n  %+v", theirs, mine)
	}
	if len(mine.Server) != 3 || mine.Server[2] != "payload" {
		t.Errorf("the server got %q, want the payload three times", mine.Server)
	}
}

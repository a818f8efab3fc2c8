package retryablehttp_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"syscall"
	"testing"
	"time"

	upstream "github.com/hashicorp/go-retryablehttp"

	ours "github.com/retryhttp/retryhttp/retryablehttp"
)

// The policies give go-retryablehttp's verdicts and errors on the cases of
// its own tests.
func TestPoliciesMatch(t *testing.T) {
	resp := func(code int) *http.Response {
		return &http.Response{StatusCode: code, Status: fmt.Sprintf("%d %s", code, http.StatusText(code)), Header: http.Header{}}
	}
	uerr := func(err error) error { return &url.Error{Op: "Get", URL: "http://x", Err: err} }
	cases := []struct {
		resp *http.Response
		err  error
	}{
		{resp(200), nil}, {resp(404), nil}, {resp(429), nil}, {resp(500), nil}, {resp(501), nil}, {resp(502), nil},
		{resp(503), nil}, {resp(0), nil}, {resp(999), nil},
		{nil, uerr(syscall.ECONNREFUSED)},
		{nil, uerr(errors.New("stopped after 10 redirects"))},
		{nil, uerr(errors.New(`unsupported protocol scheme "ftp"`))},
		{nil, uerr(errors.New(`net/http: invalid header field name "a b"`))},
		{nil, uerr(errors.New("x509: certificate is not trusted"))},
		{nil, uerr(x509.UnknownAuthorityError{})},
		{nil, uerr(&tls.CertificateVerificationError{Err: errors.New("bad")})},
		{nil, errors.New("not a url.Error")},
	}
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	for _, ctx := range []context.Context{context.Background(), cancelled} {
		for _, tc := range cases {
			for _, p := range []struct {
				name         string
				theirs, mine func(context.Context, *http.Response, error) (bool, error)
			}{
				{"DefaultRetryPolicy", upstream.DefaultRetryPolicy, ours.DefaultRetryPolicy},
				{"ErrorPropagatedRetryPolicy", upstream.ErrorPropagatedRetryPolicy, ours.ErrorPropagatedRetryPolicy},
			} {
				r1, e1 := p.theirs(ctx, tc.resp, tc.err)
				r2, e2 := p.mine(ctx, tc.resp, tc.err)
				if r1 != r2 || fmt.Sprint(e1) != fmt.Sprint(e2) {
					t.Errorf("%s(%v, %v, %v): go-retryablehttp %v %v, this package %v %v", p.name, ctx.Err(), tc.resp, tc.err, r1, e1, r2, e2)
				}
			}
		}
	}
}

// The backoffs wait what go-retryablehttp's wait.
func TestBackoffsMatch(t *testing.T) {
	with := func(code int, retryAfter string) *http.Response {
		h := http.Header{}
		if retryAfter != "" {
			h.Set("Retry-After", retryAfter)
		}
		return &http.Response{StatusCode: code, Header: h}
	}
	resps := []*http.Response{nil, with(500, ""), with(503, "3"), with(429, "7"), with(429, "-1"), with(429, "soon"),
		with(503, "Fri, 31 Dec 1999 23:59:59 GMT"), with(500, "5")}
	for _, r := range resps {
		for n := range 70 {
			for _, mm := range [][2]time.Duration{{time.Second, 30 * time.Second}, {time.Millisecond, time.Millisecond}, {0, 0}, {time.Second, time.Millisecond}} {
				a := upstream.DefaultBackoff(mm[0], mm[1], n, r)
				b := ours.DefaultBackoff(mm[0], mm[1], n, r)
				if a != b {
					t.Fatalf("DefaultBackoff(%v, %v, %d, %v): %v against %v", mm[0], mm[1], n, r, a, b)
				}
				if mm[0] >= mm[1] { // no jitter to draw: the same wait
					if a, b := upstream.LinearJitterBackoff(mm[0], mm[1], n, r), ours.LinearJitterBackoff(mm[0], mm[1], n, r); a != b {
						t.Fatalf("LinearJitterBackoff(%v, %v, %d): %v against %v", mm[0], mm[1], n, a, b)
					}
					if a, b := upstream.RateLimitLinearJitterBackoff(mm[0], mm[1], n, r), ours.RateLimitLinearJitterBackoff(mm[0], mm[1], n, r); a != b {
						t.Fatalf("RateLimitLinearJitterBackoff(%v, %v, %d, %v): %v against %v", mm[0], mm[1], n, r, a, b)
					}
				}
			}
		}
	}
	for range 100 { // with jitter: within the same bounds
		w := ours.LinearJitterBackoff(time.Second, 2*time.Second, 2, nil)
		if w < 3*time.Second || w > 6*time.Second {
			t.Fatalf("LinearJitterBackoff(1s, 2s, 2) = %v, want within [3s, 6s]", w)
		}
	}
}

// The Request's body methods behave as go-retryablehttp's for every body
// type NewRequest takes.
func TestRequestBodiesMatch(t *testing.T) {
	bodies := []func() any{
		func() any { return nil },
		func() any { return []byte("bytes") },
		func() any { return bytes.NewBufferString("buffer") },
		func() any { return bytes.NewReader([]byte("reader")) },
		func() any { return strings.NewReader("seeker") },
		func() any { return io.MultiReader(strings.NewReader("stream")) },
		func() any { return io.MultiReader() },
		func() any { return func() (io.Reader, error) { return strings.NewReader("func"), nil } },
		func() any {
			return upstream.ReaderFunc(func() (io.Reader, error) { return strings.NewReader("theirs"), nil })
		},
		func() any { return 42 },
	}
	for i, body := range bodies {
		raw1, raw2 := body(), body()
		if f, ok := raw2.(upstream.ReaderFunc); ok {
			raw2 = ours.ReaderFunc(f)
		}
		r1, err1 := upstream.NewRequest("PUT", "http://x/", raw1)
		r2, err2 := ours.NewRequest("PUT", "http://x/", raw2)
		if fmt.Sprint(err1) != fmt.Sprint(err2) {
			t.Fatalf("body %d: errors %v against %v", i, err1, err2)
		}
		if err1 != nil {
			continue
		}
		if r1.ContentLength != r2.ContentLength {
			t.Errorf("body %d: ContentLength %d against %d", i, r1.ContentLength, r2.ContentLength)
		}
		for range 2 { // read twice: the body stays
			b1, e1 := r1.BodyBytes()
			b2, e2 := r2.BodyBytes()
			if string(b1) != string(b2) || fmt.Sprint(e1) != fmt.Sprint(e2) {
				t.Errorf("body %d: BodyBytes %q %v against %q %v", i, b1, e1, b2, e2)
			}
		}
		g1, _ := r1.GetBody()
		g2, _ := r2.GetBody()
		a, _ := io.ReadAll(g1)
		b, _ := io.ReadAll(g2)
		if string(a) != string(b) {
			t.Errorf("body %d: GetBody %q against %q", i, a, b)
		}
		if r1.Body != nil {
			continue
		}
		var w1, w2 bytes.Buffer
		if raw1 != nil {
			n1, _ := r1.WriteTo(&w1)
			n2, _ := r2.WriteTo(&w2)
			if n1 != n2 || w1.String() != w2.String() {
				t.Errorf("body %d: WriteTo %d %q against %d %q", i, n1, w1.String(), n2, w2.String())
			}
		}
	}

	r, _ := ours.NewRequest("POST", "http://x/", "not a body type")
	if r != nil {
		t.Fatal("a string is not a body NewRequest takes")
	}
	r, _ = ours.NewRequest("POST", "http://x/", []byte("a"))
	if err := r.SetBody([]byte("longer")); err != nil || r.ContentLength != 6 {
		t.Fatalf("SetBody: %v, ContentLength %d", err, r.ContentLength)
	}
	ctx := context.WithValue(context.Background(), struct{}{}, 1)
	if c := r.WithContext(ctx); c.Context() != ctx || c.Request == r.Request {
		t.Fatal("WithContext: a copy with the context")
	}
	hr, _ := http.NewRequest("POST", "http://x/", strings.NewReader("from"))
	fr, err := ours.FromRequest(hr)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := fr.BodyBytes(); string(b) != "from" {
		t.Fatalf("FromRequest: body %q", b)
	}
}

// NewClient has go-retryablehttp's defaults.
func TestNewClientDefaults(t *testing.T) {
	a, b := upstream.NewClient(), ours.NewClient()
	if a.RetryMax != b.RetryMax || a.RetryWaitMin != b.RetryWaitMin || a.RetryWaitMax != b.RetryWaitMax {
		t.Fatalf("defaults %d %v %v against %d %v %v", a.RetryMax, a.RetryWaitMin, a.RetryWaitMax, b.RetryMax, b.RetryWaitMin, b.RetryWaitMax)
	}
	if b.HTTPClient == nil || b.HTTPClient.Transport == http.DefaultTransport || b.Logger == nil || b.CheckRetry == nil || b.Backoff == nil {
		t.Fatalf("NewClient: %+v", b)
	}
	defer func() {
		if recover() == nil {
			t.Fatal("a Logger of another type is a panic, as in go-retryablehttp")
		}
	}()
	b.Logger = "not a logger"
	b.Get("http://127.0.0.1:1/")
}

// leveled is a LeveledLogger that keeps its records.
type leveled struct{ lines *[]string }

func (l leveled) log(level, msg string, kv []any) {
	*l.lines = append(*l.lines, fmt.Sprint(level, " ", msg, kv))
}
func (l leveled) Error(msg string, kv ...any) { l.log("error", msg, kv) }
func (l leveled) Info(msg string, kv ...any)  { l.log("info", msg, kv) }
func (l leveled) Debug(msg string, kv ...any) { l.log("debug", msg, kv) }
func (l leveled) Warn(msg string, kv ...any)  { l.log("warn", msg, kv) }

// A LeveledLogger gets the records go-retryablehttp's would, and the log
// hooks a Logger that logs at Info.
func TestLeveledLoggerMatches(t *testing.T) {
	run := func(s *server, do func(logger any, hook func(printf func(string, ...any))) (*http.Response, error)) []string {
		var lines []string
		resp, err := do(leveled{&lines}, func(printf func(string, ...any)) { printf("hook %d", 1) })
		if err == nil {
			resp.Body.Close()
		}
		url := strings.NewReplacer(s.URL, "URL")
		for i, l := range lines {
			lines[i] = url.Replace(l)
		}
		return lines
	}
	s1, s2 := newServer(t, status(503), hangup, status(200)), newServer(t, status(503), hangup, status(200))
	theirs := run(s1, func(logger any, hook func(func(string, ...any))) (*http.Response, error) {
		c := upstream.NewClient()
		c.Logger, c.RetryWaitMin, c.RetryWaitMax = logger, time.Millisecond, time.Millisecond
		c.RequestLogHook = func(l upstream.Logger, _ *http.Request, _ int) { hook(l.Printf) }
		return c.Get(s1.URL)
	})
	mine := run(s2, func(logger any, hook func(func(string, ...any))) (*http.Response, error) {
		c := ours.NewClient()
		c.Logger, c.RetryWaitMin, c.RetryWaitMax = logger, time.Millisecond, time.Millisecond
		c.RequestLogHook = func(l ours.Logger, _ *http.Request, _ int) { hook(l.Printf) }
		return c.Get(s2.URL)
	})
	if strings.Join(theirs, "\n") != strings.Join(mine, "\n") {
		t.Fatalf("go-retryablehttp logged:\n%s\nthis package:\n%s", strings.Join(theirs, "\n"), strings.Join(mine, "\n"))
	}
}

// StandardClient and RoundTripper return what go-retryablehttp's return:
// a response, or an error http.Client wraps once.
func TestStandardClientMatches(t *testing.T) {
	for _, steps := range [][]step{{status(503), status(200)}, {status(503)}, {hangup}} {
		s1, s2 := newServer(t, steps...), newServer(t, steps...)
		c1, c2 := upstream.NewClient(), ours.NewClient()
		c1.Logger, c1.RetryMax, c1.RetryWaitMin, c1.RetryWaitMax = nil, 2, time.Millisecond, time.Millisecond
		c2.Logger, c2.RetryMax, c2.RetryWaitMin, c2.RetryWaitMax = nil, 2, time.Millisecond, time.Millisecond
		describe := func(s *server, resp *http.Response, err error) string {
			if err != nil {
				var ue *url.Error
				return fmt.Sprintf("error %v (url.Error %v)", strings.ReplaceAll(err.Error(), s.URL, "URL"), errors.As(err, &ue))
			}
			resp.Body.Close()
			return fmt.Sprintf("status %d after %d", resp.StatusCode, len(s.requests()))
		}
		r1, e1 := c1.StandardClient().Post(s1.URL, "text/plain", strings.NewReader("x"))
		r2, e2 := c2.StandardClient().Post(s2.URL, "text/plain", strings.NewReader("x"))
		if a, b := describe(s1, r1, e1), describe(s2, r2, e2); a != b {
			t.Errorf("%v: go-retryablehttp %s, this package %s", steps, a, b)
		}
	}
	var rt http.RoundTripper = &ours.RoundTripper{}
	s := newServer(t, status(200))
	resp, err := (&http.Client{Transport: rt}).Get(s.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
}

// The package's own functions send with a default Client.
func TestPackageFunctions(t *testing.T) {
	s := newServer(t, status(200))
	for _, f := range []func() (*http.Response, error){
		func() (*http.Response, error) { return ours.Get(s.URL) },
		func() (*http.Response, error) { return ours.Head(s.URL) },
		func() (*http.Response, error) { return ours.Post(s.URL, "text/plain", []byte("p")) },
		func() (*http.Response, error) { return ours.PostForm(s.URL, url.Values{"a": {"1"}}) },
	} {
		resp, err := f()
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	want := []string{"GET ", "HEAD ", "POST p", "POST a=1"}
	if got := s.requests(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("requests %q, want %q", got, want)
	}
}

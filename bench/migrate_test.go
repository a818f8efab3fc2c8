package bench

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"syscall"
	"testing"

	"github.com/hashicorp/go-retryablehttp"

	"github.com/retryhttp/retryhttp"
)

// FromCheckRetry keeps go-retryablehttp's DefaultRetryPolicy and
// ErrorPropagatedRetryPolicy: on every case of their own tests, Retry
// exactly where they say retry, and their error.
func TestFromCheckRetryMatchesDefaultRetryPolicy(t *testing.T) {
	for _, policy := range []struct {
		name  string
		check retryablehttp.CheckRetry
	}{{"DefaultRetryPolicy", retryablehttp.DefaultRetryPolicy}, {"ErrorPropagatedRetryPolicy", retryablehttp.ErrorPropagatedRetryPolicy}} {
		t.Run(policy.name, func(t *testing.T) { checkRetryCases(t, policy.check) })
	}
}

func checkRetryCases(t *testing.T, check retryablehttp.CheckRetry) {
	shouldRetry := retryhttp.FromCheckRetry(check)
	req, _ := http.NewRequest("GET", "http://example.test/", nil)
	resp := func(code int) *http.Response { return &http.Response{StatusCode: code, Header: http.Header{}} }
	cases := []struct {
		name string
		resp *http.Response
		err  error
	}{
		{"200", resp(200), nil},
		{"404", resp(404), nil},
		{"429", resp(429), nil},
		{"500", resp(500), nil},
		{"501", resp(501), nil},
		{"502", resp(502), nil},
		{"503", resp(503), nil},
		{"0 status", resp(0), nil},
		{"connection refused", nil, &url.Error{Op: "Get", URL: "http://x", Err: syscall.ECONNREFUSED}},
		{"too many redirects", nil, &url.Error{Op: "Get", URL: "http://x", Err: errors.New("stopped after 10 redirects")}},
		{"unsupported scheme", nil, &url.Error{Op: "Get", URL: "ftp://x", Err: errors.New(`unsupported protocol scheme "ftp"`)}},
		{"invalid header", nil, &url.Error{Op: "Get", URL: "http://x", Err: errors.New(`net/http: invalid header field name "a b"`)}},
		{"certificate", nil, &url.Error{Op: "Get", URL: "https://x", Err: x509.UnknownAuthorityError{}}},
		{"other error", nil, errors.New("boom")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			want, wantErr := check(context.Background(), tc.resp, tc.err)
			got, gotErr := shouldRetry(req, tc.resp, tc.err)
			if (got == retryhttp.DecisionRetry) != want {
				t.Fatalf("the policy says retry=%v, the adapter %v", want, got)
			}
			if fmt.Sprint(gotErr) != fmt.Sprint(wantErr) {
				t.Fatalf("the policy's error %v, the adapter's %v", wantErr, gotErr)
			}
		})
	}
	t.Run("a cancelled context stops", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		r := req.WithContext(ctx)
		if got, err := shouldRetry(r, resp(503), nil); got != retryhttp.DecisionStop || !errors.Is(err, context.Canceled) {
			t.Fatalf("%v, %v; want Stop, context.Canceled", got, err)
		}
	})
}

// Through the Transport: the policy's choices, under our safety rules.
func TestFromCheckRetryInTransport(t *testing.T) {
	for _, tc := range []struct {
		method   string
		statuses []int
		attempts int
	}{
		{"GET", []int{500, 200}, 2},  // go-retryablehttp retries a 500: so does its policy here
		{"GET", []int{501, 200}, 1},  // not a 501
		{"POST", []int{503, 200}, 1}, // a POST without a key may have reached the server: never re-sent
	} {
		t.Run(fmt.Sprint(tc.method, tc.statuses), func(t *testing.T) {
			n := 0
			base := rtFunc(func(r *http.Request) (*http.Response, error) {
				code := tc.statuses[min(n, len(tc.statuses)-1)]
				n++
				return &http.Response{StatusCode: code, Header: http.Header{}, Body: io.NopCloser(strings.NewReader(""))}, nil
			})
			tr := &retryhttp.Transport{Base: base, Policy: noWait, ShouldRetry: retryhttp.FromCheckRetry(retryablehttp.DefaultRetryPolicy)}
			req, _ := http.NewRequest(tc.method, "http://example.test/", strings.NewReader("x"))
			resp, err := tr.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if n != tc.attempts {
				t.Fatalf("%d attempts, want %d", n, tc.attempts)
			}
		})
	}
}

// A CheckRetry's error through the Transport, as go-retryablehttp treats
// it: ErrorPropagatedRetryPolicy on a 503 retries (4 attempts, as
// go-retryablehttp's RetryMax 3 makes) and the caller gets its error; a
// (false, err) returns err at once, the response closed.
func TestFromCheckRetryErrorsInTransport(t *testing.T) {
	serve := func(n *int) http.RoundTripper {
		return rtFunc(func(r *http.Request) (*http.Response, error) {
			*n++
			return &http.Response{StatusCode: 503, Status: "503 Service Unavailable", Header: http.Header{}, Body: io.NopCloser(strings.NewReader("")), Request: r}, nil
		})
	}
	var theirs, ours int
	c := retryablehttp.NewClient()
	c.HTTPClient = &http.Client{Transport: serve(&theirs)}
	c.Logger, c.RetryMax, c.RetryWaitMin, c.RetryWaitMax = nil, 3, 0, 0
	c.CheckRetry = retryablehttp.ErrorPropagatedRetryPolicy
	_, theirErr := c.Get("http://example.test/")
	tr := &retryhttp.Transport{Base: serve(&ours), Policy: noWait, ShouldRetry: retryhttp.FromCheckRetry(retryablehttp.ErrorPropagatedRetryPolicy)}
	req, _ := http.NewRequest("GET", "http://example.test/", nil)
	resp, err := tr.RoundTrip(req)
	if resp != nil || err == nil {
		t.Fatalf("got %v, %v; want the policy's error", resp, err)
	}
	if theirs != 4 || ours != theirs {
		t.Fatalf("attempts: go-retryablehttp %d, the Transport %d; want 4 and 4", theirs, ours)
	}
	const text = "unexpected HTTP status 503 Service Unavailable"
	if !strings.Contains(theirErr.Error(), text) || !strings.Contains(err.Error(), text) {
		t.Fatalf("errors %q and %q; want both to carry %q", theirErr, err, text)
	}

	refused := errors.New("refused by the policy")
	var n int
	var closed bool
	base := rtFunc(func(r *http.Request) (*http.Response, error) {
		n++
		return &http.Response{StatusCode: 200, Header: http.Header{}, Body: closeFunc(func() { closed = true })}, nil
	})
	tr = &retryhttp.Transport{Base: base, Policy: noWait, ShouldRetry: retryhttp.FromCheckRetry(func(context.Context, *http.Response, error) (bool, error) {
		return false, refused
	})}
	resp, err = tr.RoundTrip(req)
	if resp != nil || !errors.Is(err, refused) || err.Error() != refused.Error() || n != 1 || !closed {
		t.Fatalf("got %v, %v after %d attempts (body closed %v); want nil, %q, 1, true", resp, err, n, closed, refused)
	}
}

type closeFunc func()

func (f closeFunc) Read([]byte) (int, error) { return 0, io.EOF }
func (f closeFunc) Close() error             { f(); return nil }

type rtFunc func(*http.Request) (*http.Response, error)

func (f rtFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

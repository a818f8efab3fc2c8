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

// FromCheckRetry keeps go-retryablehttp's DefaultRetryPolicy: on every case
// of its own tests, Retry exactly where it says retry.
func TestFromCheckRetryMatchesDefaultRetryPolicy(t *testing.T) {
	shouldRetry := retryhttp.FromCheckRetry(retryablehttp.DefaultRetryPolicy)
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
			want, _ := retryablehttp.DefaultRetryPolicy(context.Background(), tc.resp, tc.err)
			got := shouldRetry(req, tc.resp, tc.err)
			if (got == retryhttp.DecisionRetry) != want {
				t.Fatalf("DefaultRetryPolicy says retry=%v, the adapter %v", want, got)
			}
		})
	}
	t.Run("a cancelled context stops", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		r := req.WithContext(ctx)
		if got := shouldRetry(r, resp(503), nil); got != retryhttp.DecisionStop {
			t.Fatalf("%v, want Stop", got)
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

type rtFunc func(*http.Request) (*http.Response, error)

func (f rtFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

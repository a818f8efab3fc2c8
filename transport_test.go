package retryhttp

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var (
	errRefused = &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	errReset   = &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}
	errNoHost  = &net.OpError{Op: "dial", Net: "tcp", Err: &net.DNSError{Err: "no such host", Name: "x.invalid", IsNotFound: true}}
	errDNSTemp = &net.OpError{Op: "dial", Net: "tcp", Err: &net.DNSError{Err: "server misbehaving", Name: "x.example", IsTemporary: true}}
	errTimeout = &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}
)

func newReq(t testing.TB, method, body string, header http.Header) *http.Request {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, "http://api.test/things?secret=1", r)
	require.NoError(t, err)
	for k, v := range header {
		req.Header[k] = v
	}
	return req
}

// TestWhatIsRetried: behaviour 1, method and key against one retryable
// status and two kinds of network error.
func TestWhatIsRetried(t *testing.T) {
	key := http.Header{"Idempotency-Key": {"k-1"}}
	xkey := http.Header{"X-Idempotency-Key": {"k-1"}}
	nilKey := http.Header{"Idempotency-Key": nil}
	cases := []struct {
		name     string
		method   string
		header   http.Header
		inject   bool
		outcome  step
		attempts int
	}{
		{"GET 503", "GET", nil, false, status(503), 4},
		{"empty method is GET", "", nil, false, status(503), 4},
		{"HEAD 503", "HEAD", nil, false, status(503), 4},
		{"OPTIONS 503", "OPTIONS", nil, false, status(503), 4},
		{"TRACE 503", "TRACE", nil, false, status(503), 4},
		{"PUT 503", "PUT", nil, false, status(503), 4},
		{"DELETE 503", "DELETE", nil, false, status(503), 4},
		{"POST 503 no key", "POST", nil, false, status(503), 1},
		{"PATCH 503 no key", "PATCH", nil, false, status(503), 1},
		{"POST 503 Idempotency-Key", "POST", key, false, status(503), 4},
		{"POST 503 X-Idempotency-Key", "POST", xkey, false, status(503), 4},
		{"POST 503 nil-valued key marks it idempotent", "POST", nilKey, false, status(503), 4},
		{"POST 503 injected key", "POST", nil, true, status(503), 4},
		{"PATCH 503 injected key", "PATCH", nil, true, status(503), 4},
		{"CONNECT 503 inject does not apply", "CONNECT", nil, true, status(503), 1},
		{"POST reset no key", "POST", nil, false, fail(errReset), 1},
		{"POST reset with key", "POST", key, false, fail(errReset), 4},
		{"POST refused no key: nothing was sent", "POST", nil, false, fail(errRefused), 4},
		{"POST temporary DNS failure no key", "POST", nil, false, fail(errDNSTemp), 4},
		{"GET unknown host", "GET", nil, false, fail(errNoHost), 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			base := script(tc.outcome)
			tr := &Transport{Base: base, Policy: noWait, InjectIdempotencyKey: tc.inject}
			resp, err := tr.RoundTrip(newReq(t, tc.method, "payload", tc.header))
			if tc.outcome.err != nil {
				require.Error(t, err)
				var re *RetryError
				require.ErrorAs(t, err, &re)
				assert.Equal(t, tc.attempts, re.Attempts)
				assert.ErrorIs(t, err, tc.outcome.err)
			} else {
				require.NoError(t, err)
				assert.Equal(t, tc.outcome.status, resp.StatusCode)
				resp.Body.Close()
			}
			assert.Equal(t, tc.attempts, base.attempts())
			for _, c := range base.seen() {
				assert.Equal(t, "payload", c.body, "every attempt carries the whole body")
			}
		})
	}
}

// TestWhatTriggersRetry: behaviour 2, for a replayable request.
func TestWhatTriggersRetry(t *testing.T) {
	certErr := &url_Error{Op: "Get", Err: x509.UnknownAuthorityError{}}
	cases := []struct {
		name    string
		outcome step
		key     bool
		retry   bool
	}{
		{"408", status(408), false, true},
		{"429", status(429), false, true},
		{"502", status(502), false, true},
		{"503", status(503), false, true},
		{"504", status(504), false, true},
		{"409 with key", status(409), true, true},
		{"409 without key", status(409), false, false},
		{"400", status(400), false, false},
		{"401", status(401), false, false},
		{"403", status(403), false, false},
		{"404", status(404), false, false},
		{"422", status(422), false, false},
		{"500", status(500), false, false},
		{"501", status(501), false, false},
		{"200", status(200), false, false},
		{"connection reset", fail(errReset), false, true},
		{"connection refused", fail(errRefused), false, true},
		{"unexpected EOF", fail(fmt.Errorf("reading: %w", io.ErrUnexpectedEOF)), false, true},
		{"read timeout", fail(errTimeout), false, true},
		{"broken pipe", fail(&net.OpError{Op: "write", Err: os.NewSyscallError("write", syscall.EPIPE)}), false, true},
		{"certificate", fail(certErr), false, false},
		{"unknown error", fail(errors.New("net/http: invalid header field name")), false, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			base := script(tc.outcome, status(200))
			tr := &Transport{Base: base, Policy: noWait}
			h := http.Header{}
			if tc.key {
				h.Set("Idempotency-Key", "k")
			}
			resp, err := tr.RoundTrip(newReq(t, "GET", "", h))
			want := 1
			if tc.retry {
				want = 2
			}
			assert.Equal(t, want, base.attempts())
			if tc.retry {
				require.NoError(t, err)
				assert.Equal(t, 200, resp.StatusCode)
			}
		})
	}
}

// url_Error stands in for *url.Error: any wrapper must be seen through.
type url_Error struct {
	Op  string
	Err error
}

func (e *url_Error) Error() string { return e.Op + ": " + e.Err.Error() }
func (e *url_Error) Unwrap() error { return e.Err }

func TestRetryStatusesAndShouldRetry(t *testing.T) {
	t.Run("custom statuses replace the default set", func(t *testing.T) {
		base := script(status(500), status(503), status(200))
		tr := &Transport{Base: base, Policy: noWait, RetryStatuses: []int{500}}
		resp, err := tr.RoundTrip(newReq(t, "GET", "", nil))
		require.NoError(t, err)
		assert.Equal(t, 503, resp.StatusCode, "503 is no longer in the set")
		assert.Equal(t, 2, base.attempts())
	})
	t.Run("defaults extended", func(t *testing.T) {
		statuses := append(DefaultRetryStatuses(), 500)
		assert.Equal(t, []int{408, 409, 429, 502, 503, 504}, DefaultRetryStatuses(), "a copy: extending it changes nothing shared")
		base := script(status(500), status(503), status(200))
		resp, err := (&Transport{Base: base, Policy: noWait, RetryStatuses: statuses}).RoundTrip(newReq(t, "GET", "", nil))
		require.NoError(t, err)
		assert.Equal(t, 200, resp.StatusCode)
	})
	t.Run("empty set retries no status", func(t *testing.T) {
		base := script(status(503), status(200))
		tr := &Transport{Base: base, Policy: noWait, RetryStatuses: []int{}}
		resp, err := tr.RoundTrip(newReq(t, "GET", "", nil))
		require.NoError(t, err)
		assert.Equal(t, 503, resp.StatusCode)
	})
	t.Run("hook reads an SDK header", func(t *testing.T) {
		r1 := step{status: 400, header: http.Header{"X-Should-Retry": {"true"}}}
		r2 := step{status: 503, header: http.Header{"X-Should-Retry": {"false"}}}
		base := script(r1, r2, status(200))
		var gotReq *http.Request
		tr := &Transport{Base: base, Policy: noWait, ShouldRetry: func(req *http.Request, resp *http.Response, err error) (Decision, error) {
			gotReq = req
			switch resp.Header.Get("X-Should-Retry") {
			case "true":
				return DecisionRetry, nil
			case "false":
				return DecisionStop, nil
			}
			return DecisionDefer, nil
		}}
		resp, err := tr.RoundTrip(newReq(t, "GET", "", nil))
		require.NoError(t, err)
		assert.Equal(t, 503, resp.StatusCode, "Stop overrides the default set")
		assert.Equal(t, 2, base.attempts())
		assert.NotNil(t, gotReq)
	})
	t.Run("hook cannot make an unsafe POST retry", func(t *testing.T) {
		base := script(status(503), status(200))
		tr := &Transport{Base: base, Policy: noWait, ShouldRetry: func(*http.Request, *http.Response, error) (Decision, error) { return DecisionRetry, nil }}
		resp, err := tr.RoundTrip(newReq(t, "POST", "x", nil))
		require.NoError(t, err)
		assert.Equal(t, 503, resp.StatusCode)
		assert.Equal(t, 1, base.attempts())
	})
	t.Run("hook sees errors", func(t *testing.T) {
		myErr := errors.New("sdk: throttled")
		base := script(fail(myErr), status(200))
		tr := &Transport{Base: base, Policy: noWait, ShouldRetry: func(_ *http.Request, _ *http.Response, err error) (Decision, error) {
			if errors.Is(err, myErr) {
				return DecisionRetry, nil
			}
			return DecisionDefer, nil
		}}
		resp, err := tr.RoundTrip(newReq(t, "GET", "", nil))
		require.NoError(t, err)
		assert.Equal(t, 200, resp.StatusCode)
	})
}

// A hook's time on a retry's event is part of the wait, not added to it:
// the retry is sent BaseDelay after the failure, however long the hook
// took (less than the wait).
func TestWaitCountsTheHooksTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := script(status(503), status(200))
		slowHook := HookFunc(func(ctx context.Context, e Event) {
			if e.Kind == EventRetry {
				time.Sleep(30 * time.Millisecond)
			}
		})
		tr := &Transport{Base: base, Hooks: []Hook{slowHook},
			Policy: Policy{MaxAttempts: 2, BaseDelay: 100 * time.Millisecond, MaxDelay: 100 * time.Millisecond, Jitter: JitterNone}}
		resp, err := tr.RoundTrip(newReq(t, "GET", "", nil))
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, []time.Duration{100 * time.Millisecond}, base.gaps())
	})
}

// TestWaits: behaviour 3, the waits a Transport actually makes, exactly, in
// synctest time.
func TestWaits(t *testing.T) {
	cases := []struct {
		name   string
		policy Policy
		check  func(t *testing.T, i int, gap time.Duration)
	}{
		{"no jitter doubles to the cap", Policy{MaxAttempts: 6, BaseDelay: 100 * time.Millisecond, MaxDelay: 500 * time.Millisecond, Jitter: JitterNone},
			func(t *testing.T, i int, gap time.Duration) {
				want := []time.Duration{100, 200, 400, 500, 500}[i] * time.Millisecond
				assert.Equal(t, want, gap, "wait %d", i)
			}},
		{"full jitter within [0, ceiling]", Policy{MaxAttempts: 6, BaseDelay: 100 * time.Millisecond, MaxDelay: 500 * time.Millisecond},
			func(t *testing.T, i int, gap time.Duration) {
				ceil := []time.Duration{100, 200, 400, 500, 500}[i] * time.Millisecond
				assert.True(t, gap >= 0 && gap <= ceil, "wait %d = %v", i, gap)
			}},
		{"equal jitter within [ceiling/2, ceiling]", Policy{MaxAttempts: 6, BaseDelay: 100 * time.Millisecond, MaxDelay: 500 * time.Millisecond, Jitter: JitterEqual},
			func(t *testing.T, i int, gap time.Duration) {
				ceil := []time.Duration{100, 200, 400, 500, 500}[i] * time.Millisecond
				assert.True(t, gap >= ceil/2 && gap <= ceil, "wait %d = %v", i, gap)
			}},
		{"decorrelated within [base, cap]", Policy{MaxAttempts: 6, BaseDelay: 100 * time.Millisecond, MaxDelay: 500 * time.Millisecond, Jitter: JitterDecorrelated},
			func(t *testing.T, i int, gap time.Duration) {
				assert.True(t, gap >= 100*time.Millisecond && gap <= 500*time.Millisecond, "wait %d = %v", i, gap)
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				base := script(status(503))
				tr := &Transport{Base: base, Policy: tc.policy}
				resp, err := tr.RoundTrip(newReq(t, "GET", "", nil))
				require.NoError(t, err)
				resp.Body.Close()
				gaps := base.gaps()
				require.Len(t, gaps, 5)
				for i, g := range gaps {
					tc.check(t, i, g)
				}
			})
		})
	}
}

// TestRetryAfter: behaviour 4.
func TestRetryAfter(t *testing.T) {
	slow := Policy{BaseDelay: time.Second, MaxDelay: time.Second, Jitter: JitterNone}
	t.Run("delta-seconds overrides backoff exactly without jitter", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			base := script(retryAfter(429, "3"), status(200))
			resp, err := (&Transport{Base: base, Policy: slow}).RoundTrip(newReq(t, "GET", "", nil))
			require.NoError(t, err)
			assert.Equal(t, 200, resp.StatusCode)
			assert.Equal(t, []time.Duration{3 * time.Second}, base.gaps())
		})
	})
	t.Run("HTTP-date", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			at := time.Now().Add(5 * time.Second).UTC().Format(http.TimeFormat)
			base := script(retryAfter(503, at), status(200))
			_, err := (&Transport{Base: base, Policy: slow}).RoundTrip(newReq(t, "GET", "", nil))
			require.NoError(t, err)
			assert.Equal(t, []time.Duration{5 * time.Second}, base.gaps())
		})
	})
	t.Run("jittered clients wait at least Retry-After, spread over one BaseDelay", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			p := Policy{BaseDelay: 200 * time.Millisecond}
			seenGaps := map[time.Duration]bool{}
			for range 20 {
				base := script(retryAfter(503, "2"), status(200))
				_, err := (&Transport{Base: base, Policy: p}).RoundTrip(newReq(t, "GET", "", nil))
				require.NoError(t, err)
				g := base.gaps()[0]
				assert.GreaterOrEqual(t, g, 2*time.Second)
				assert.LessOrEqual(t, g, 2*time.Second+200*time.Millisecond)
				seenGaps[g] = true
			}
			assert.Greater(t, len(seenGaps), 10, "clients told the same value come back at different times")
		})
	})
	for _, v := range []string{"soon", "-5", "1.5", "", "Sun, 06 Nov 1994 08:49:37 GMT"} {
		t.Run(fmt.Sprintf("fallback to backoff for %q", v), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				base := script(retryAfter(503, v), status(200))
				_, err := (&Transport{Base: base, Policy: slow}).RoundTrip(newReq(t, "GET", "", nil))
				require.NoError(t, err)
				assert.Equal(t, []time.Duration{time.Second}, base.gaps())
			})
		})
	}
	giveUps := []struct {
		name   string
		policy Policy
		ctx    time.Duration
		value  string
	}{
		{"longer than MaxRetryAfter", Policy{MaxRetryAfter: 10 * time.Second}, 0, "11"},
		{"longer than remaining MaxElapsed", Policy{MaxElapsed: 5 * time.Second}, 0, "6"},
		{"past the context deadline", Policy{}, 4 * time.Second, "5"},
		{"absurdly long", Policy{}, 0, "99999999999999999999999"},
	}
	for _, tc := range giveUps {
		t.Run("return at once when "+tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				base := script(retryAfter(503, tc.value), status(200))
				ctx := t.Context()
				if tc.ctx > 0 {
					var cancel context.CancelFunc
					ctx, cancel = context.WithTimeout(ctx, tc.ctx)
					defer cancel()
				}
				start := time.Now()
				resp, err := (&Transport{Base: base, Policy: tc.policy}).RoundTrip(newReq(t, "GET", "", nil).WithContext(ctx))
				require.NoError(t, err)
				assert.Equal(t, 503, resp.StatusCode)
				assert.Equal(t, tc.value, resp.Header.Get("Retry-After"))
				assert.Equal(t, time.Duration(0), time.Since(start), "no waiting")
				assert.Equal(t, 1, base.attempts())
			})
		})
	}
	t.Run("ignored on a status that is not retried", func(t *testing.T) {
		base := script(retryAfter(500, "1"), status(200))
		resp, err := (&Transport{Base: base, Policy: slow}).RoundTrip(newReq(t, "GET", "", nil))
		require.NoError(t, err)
		assert.Equal(t, 500, resp.StatusCode)
		assert.Equal(t, 1, base.attempts())
	})
}

// TestWhenToStop: behaviour 5.
func TestWhenToStop(t *testing.T) {
	t.Run("MaxAttempts", func(t *testing.T) {
		for _, n := range []int{1, 2, 7} {
			base := script(status(503))
			resp, err := (&Transport{Base: base, Policy: Policy{MaxAttempts: n, BaseDelay: time.Nanosecond}}).RoundTrip(newReq(t, "GET", "", nil))
			require.NoError(t, err)
			resp.Body.Close()
			assert.Equal(t, n, base.attempts())
		}
	})
	t.Run("MaxElapsed: give up now rather than sleep and fail", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			base := script(fail(errReset))
			p := Policy{MaxAttempts: 100, BaseDelay: time.Second, MaxDelay: time.Second, MaxElapsed: 3500 * time.Millisecond, Jitter: JitterNone}
			start := time.Now()
			_, err := (&Transport{Base: base, Policy: p}).RoundTrip(newReq(t, "GET", "", nil))
			var re *RetryError
			require.ErrorAs(t, err, &re)
			assert.Equal(t, ReasonElapsed, re.Reason)
			assert.Equal(t, 4, re.Attempts)
			assert.Equal(t, 3*time.Second, time.Since(start))
		})
	})
	t.Run("context deadline", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			base := script(fail(errReset))
			ctx, cancel := context.WithTimeout(t.Context(), 2500*time.Millisecond)
			defer cancel()
			p := Policy{MaxAttempts: 100, BaseDelay: time.Second, MaxDelay: time.Second, Jitter: JitterNone}
			start := time.Now()
			_, err := (&Transport{Base: base, Policy: p}).RoundTrip(newReq(t, "GET", "", nil).WithContext(ctx))
			var re *RetryError
			require.ErrorAs(t, err, &re)
			assert.Equal(t, ReasonDeadline, re.Reason)
			assert.Equal(t, 3, re.Attempts)
			assert.Equal(t, 2*time.Second, time.Since(start))
			assert.ErrorIs(t, err, syscall.ECONNRESET)
		})
	})
	t.Run("cancel during a wait returns at once", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			base := script(status(503))
			cause := errors.New("user went away")
			ctx, cancel := context.WithCancelCause(t.Context())
			p := Policy{BaseDelay: 10 * time.Second, MaxDelay: 10 * time.Second, Jitter: JitterNone}
			done := make(chan error)
			go func() {
				_, err := (&Transport{Base: base, Policy: p}).RoundTrip(newReq(t, "GET", "", nil).WithContext(ctx))
				done <- err
			}()
			time.Sleep(time.Second)
			synctest.Wait()
			start := time.Now()
			cancel(cause)
			err := <-done
			assert.Equal(t, time.Duration(0), time.Since(start))
			assert.ErrorIs(t, err, cause)
			var re *RetryError
			require.ErrorAs(t, err, &re)
			assert.Equal(t, ReasonCanceled, re.Reason)
			assert.Equal(t, []bool{true}, base.closedBodies(), "the discarded 503 was closed")
		})
	})
	t.Run("cancelled context is not retried", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		base := script(fail(context.Canceled))
		_, err := (&Transport{Base: base, Policy: noWait}).RoundTrip(newReq(t, "GET", "", nil).WithContext(ctx))
		assert.ErrorIs(t, err, context.Canceled)
		assert.Equal(t, 1, base.attempts())
	})
}

// TestWhatTheCallerGets: behaviour 6.
func TestWhatTheCallerGets(t *testing.T) {
	t.Run("last response on exhaustion, body readable, earlier ones closed", func(t *testing.T) {
		base := script(status(503))
		req := newReq(t, "GET", "", nil)
		resp, err := (&Transport{Base: base, Policy: noWait}).RoundTrip(req)
		require.NoError(t, err)
		assert.Equal(t, 503, resp.StatusCode)
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		assert.Equal(t, "attempt 4", string(b))
		assert.Same(t, req, resp.Request)
		assert.Equal(t, []bool{true, true, true, false}, base.closedBodies())
		resp.Body.Close()
	})
	t.Run("network error wrapped with the attempt count", func(t *testing.T) {
		base := script(fail(errReset))
		resp, err := (&Transport{Base: base, Policy: noWait}).RoundTrip(newReq(t, "GET", "", nil))
		assert.Nil(t, resp)
		var re *RetryError
		require.ErrorAs(t, err, &re)
		assert.Equal(t, 4, re.Attempts)
		assert.Equal(t, ReasonAttempts, re.Reason)
		assert.ErrorIs(t, err, syscall.ECONNRESET)
		assert.Equal(t, "retryhttp: gave up: attempt limit reached (4 attempts): "+errReset.Error(), err.Error())
	})
	t.Run("nil URL is an error, not a panic", func(t *testing.T) {
		b, _ := NewBreaker(BreakerOptions{})
		body := &closeTracker{Reader: strings.NewReader("x")}
		_, err := (&Transport{Base: script(status(200)), Breaker: b}).RoundTrip(&http.Request{Method: "POST", Body: body})
		assert.ErrorContains(t, err, "nil Request.URL")
		assert.True(t, body.closed)
	})
	t.Run("invalid policy", func(t *testing.T) {
		for _, p := range []Policy{{MaxAttempts: -1}, {BaseDelay: -1}, {MaxDelay: -1}, {MaxElapsed: -1}, {AttemptTimeout: -1}, {MaxRetryAfter: -1}, {MaxBufferedBody: -1}, {Jitter: 9}} {
			body := &closeTracker{Reader: strings.NewReader("x")}
			req := newReq(t, "POST", "", nil)
			req.Body = body
			base := script(status(200))
			_, err := (&Transport{Base: base, Policy: p}).RoundTrip(req)
			assert.ErrorIs(t, err, ErrInvalidPolicy)
			assert.True(t, body.closed, "body closed even when nothing is sent")
			assert.Equal(t, 0, base.attempts())
		}
	})
}

// TestBodies: behaviour 7.
func TestBodies(t *testing.T) {
	key := http.Header{"Idempotency-Key": {"k"}}
	t.Run("GetBody is used, not a copy", func(t *testing.T) {
		base := script(status(503), status(503), status(200))
		req := newReq(t, "PUT", "hello", nil)
		calls := 0
		getBody := req.GetBody
		req.GetBody = func() (io.ReadCloser, error) { calls++; return getBody() }
		resp, err := (&Transport{Base: base, Policy: noWait}).RoundTrip(req)
		require.NoError(t, err)
		assert.Equal(t, 200, resp.StatusCode)
		assert.Equal(t, 2, calls, "one GetBody per retry")
		for _, c := range base.seen() {
			assert.Equal(t, "hello", c.body)
		}
	})
	t.Run("GetBody error stops: the caller gets the last response", func(t *testing.T) {
		base := script(status(503))
		req := newReq(t, "PUT", "hello", nil)
		boom := errors.New("boom")
		req.GetBody = func() (io.ReadCloser, error) { return nil, boom }
		var events []Event
		resp, err := (&Transport{Base: base, Policy: noWait, Hooks: []Hook{retryHook(func(e Event) { events = append(events, e) })}}).RoundTrip(req)
		require.NoError(t, err)
		assert.Equal(t, 503, resp.StatusCode)
		b, _ := io.ReadAll(resp.Body)
		assert.Equal(t, "attempt 1", string(b), "its body still readable")
		assert.Equal(t, 1, base.attempts())
		require.Len(t, events, 2)
		assert.Equal(t, ReasonBody, events[1].GiveUp)
	})
	t.Run("GetBody error with no response before: the error", func(t *testing.T) {
		base := script(fail(errReset))
		req := newReq(t, "PUT", "hello", nil)
		boom := errors.New("boom")
		req.GetBody = func() (io.ReadCloser, error) { return nil, boom }
		_, err := (&Transport{Base: base, Policy: noWait}).RoundTrip(req)
		assert.ErrorIs(t, err, boom)
		var re *RetryError
		require.ErrorAs(t, err, &re)
		assert.Equal(t, ReasonBody, re.Reason)
		assert.Equal(t, 1, re.Attempts)
	})
	t.Run("small body without GetBody is buffered and replayed", func(t *testing.T) {
		base := script(status(503), status(200))
		body := &closeTracker{Reader: strings.NewReader("abc")}
		req := newReq(t, "POST", "", key)
		req.Body, req.ContentLength = body, 3
		resp, err := (&Transport{Base: base, Policy: noWait}).RoundTrip(req)
		require.NoError(t, err)
		assert.Equal(t, 200, resp.StatusCode)
		assert.True(t, body.closed)
		assert.Equal(t, "abc", base.seen()[0].body)
		assert.Equal(t, "abc", base.seen()[1].body)
	})
	t.Run("unknown length is streamed once", func(t *testing.T) {
		base := script(status(503), status(200))
		req := newReq(t, "PUT", "", nil)
		req.Body, req.ContentLength = io.NopCloser(strings.NewReader("stream")), -1
		resp, err := (&Transport{Base: base, Policy: noWait}).RoundTrip(req)
		require.NoError(t, err)
		assert.Equal(t, 503, resp.StatusCode)
		assert.Equal(t, 1, base.attempts())
		assert.Equal(t, "stream", base.seen()[0].body)
	})
	t.Run("longer than MaxBufferedBody is streamed once", func(t *testing.T) {
		base := script(status(503), status(200))
		req := newReq(t, "PUT", "", nil)
		r := &countingReader{r: strings.NewReader(strings.Repeat("x", 100))}
		req.Body, req.ContentLength = io.NopCloser(r), 100
		p := noWait
		p.MaxBufferedBody = 99
		resp, err := (&Transport{Base: base, Policy: p}).RoundTrip(req)
		require.NoError(t, err)
		assert.Equal(t, 503, resp.StatusCode)
		assert.Equal(t, 1, base.attempts())
		assert.Equal(t, 100, r.n, "read once, by the base")
	})
	t.Run("dial failure does not retry a streamed body it cannot replay", func(t *testing.T) {
		base := script(fail(errRefused), status(200))
		req := newReq(t, "POST", "", nil)
		req.Body, req.ContentLength = io.NopCloser(strings.NewReader("s")), -1
		_, err := (&Transport{Base: base, Policy: noWait}).RoundTrip(req)
		assert.ErrorIs(t, err, syscall.ECONNREFUSED)
		assert.Equal(t, 1, base.attempts())
	})
	t.Run("read error before sending sends nothing", func(t *testing.T) {
		base := script(status(200))
		boom := errors.New("disk on fire")
		body := &closeTracker{Reader: io.MultiReader(strings.NewReader("ab"), errReader{boom})}
		req := newReq(t, "POST", "", nil)
		req.Body, req.ContentLength = body, 10
		_, err := (&Transport{Base: base, Policy: noWait}).RoundTrip(req)
		assert.ErrorIs(t, err, boom)
		assert.Equal(t, 0, base.attempts())
		assert.True(t, body.closed)
	})
	t.Run("short body is an error, not a truncated request", func(t *testing.T) {
		base := script(status(200))
		req := newReq(t, "POST", "", nil)
		req.Body, req.ContentLength = io.NopCloser(strings.NewReader("ab")), 10
		_, err := (&Transport{Base: base, Policy: noWait}).RoundTrip(req)
		assert.ErrorContains(t, err, "ContentLength")
		assert.Equal(t, 0, base.attempts())
	})
	t.Run("long body is an error, not a truncated request", func(t *testing.T) {
		base := script(status(200))
		req := newReq(t, "POST", "", nil)
		req.Body, req.ContentLength = io.NopCloser(strings.NewReader("abcdef")), 3
		_, err := (&Transport{Base: base, Policy: noWait}).RoundTrip(req)
		assert.ErrorContains(t, err, "longer than ContentLength 3")
		assert.Equal(t, 0, base.attempts())
	})
	t.Run("MaxAttempts 1 never buffers", func(t *testing.T) {
		base := script(status(200))
		req := newReq(t, "POST", "", nil)
		r := &countingReader{r: strings.NewReader("abc")}
		req.Body, req.ContentLength = io.NopCloser(r), 3
		_, err := (&Transport{Base: base, Policy: Policy{MaxAttempts: 1}}).RoundTrip(req)
		require.NoError(t, err)
		assert.Equal(t, "abc", base.seen()[0].body)
	})
}

type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

// TestIdempotencyKeys: behaviour 8.
func TestIdempotencyKeys(t *testing.T) {
	t.Run("one injected key per logical request, the same on every attempt", func(t *testing.T) {
		base := script(status(503), status(503), status(200))
		tr := &Transport{Base: base, Policy: noWait, InjectIdempotencyKey: true}
		req := newReq(t, "POST", "{}", http.Header{"Authorization": {"Bearer t"}})
		resp, err := tr.RoundTrip(req)
		require.NoError(t, err)
		assert.Equal(t, 200, resp.StatusCode)
		calls := base.seen()
		require.Len(t, calls, 3)
		k := calls[0].header.Get("Idempotency-Key")
		u, err := uuid.Parse(k)
		require.NoError(t, err)
		assert.Equal(t, uuid.Version(4), u.Version())
		for _, c := range calls {
			assert.Equal(t, k, c.header.Get("Idempotency-Key"))
			assert.Equal(t, "Bearer t", c.header.Get("Authorization"))
		}
		assert.Empty(t, req.Header.Get("Idempotency-Key"), "the caller's request is not modified")
		assert.Same(t, req, resp.Request)

		// A second logical request gets a new key.
		base2 := script(status(200))
		tr.Base = base2
		_, err = tr.RoundTrip(newReq(t, "POST", "{}", nil))
		require.NoError(t, err)
		assert.NotEqual(t, k, base2.seen()[0].header.Get("Idempotency-Key"))
	})
	t.Run("a caller's key is never replaced", func(t *testing.T) {
		base := script(status(503), status(200))
		tr := &Transport{Base: base, Policy: noWait, InjectIdempotencyKey: true}
		_, err := tr.RoundTrip(newReq(t, "POST", "{}", http.Header{"Idempotency-Key": {"mine"}}))
		require.NoError(t, err)
		for _, c := range base.seen() {
			assert.Equal(t, []string{"mine"}, c.header.Values("Idempotency-Key"))
		}
	})
	t.Run("GET gets no key", func(t *testing.T) {
		base := script(status(200))
		_, err := (&Transport{Base: base, InjectIdempotencyKey: true}).RoundTrip(newReq(t, "GET", "", nil))
		require.NoError(t, err)
		assert.Empty(t, base.seen()[0].header.Get("Idempotency-Key"))
	})
}

// TestConcurrentUse: behaviour 9, under -race.
func TestConcurrentUse(t *testing.T) {
	base := script(status(503), status(200))
	tr := &Transport{InjectIdempotencyKey: true, Policy: noWait, Base: base}
	done := make(chan struct{})
	for range 16 {
		go func() {
			defer func() { done <- struct{}{} }()
			for range 20 {
				resp, err := tr.RoundTrip(newReq(t, "POST", "body", nil))
				if assert.NoError(t, err) {
					resp.Body.Close()
				}
			}
		}()
	}
	for range 16 {
		<-done
	}
	assert.Equal(t, 321, base.attempts(), "one retry for the first request, none after")
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestAttemptTimeout: an attempt whose headers are late is abandoned and
// retried; the body of the response that made it in time stays readable
// past the timeout.
func TestAttemptTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		calls := 0
		base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			calls++
			if calls == 1 {
				<-r.Context().Done()
				return nil, r.Context().Err()
			}
			return &http.Response{StatusCode: 200, Body: io.NopCloser(strings.NewReader("ok")), Header: http.Header{}}, nil
		})
		p := Policy{AttemptTimeout: time.Second, BaseDelay: time.Millisecond, Jitter: JitterNone}
		start := time.Now()
		resp, err := (&Transport{Base: base, Policy: p}).RoundTrip(newReq(t, "GET", "", nil))
		require.NoError(t, err)
		assert.Equal(t, time.Second+time.Millisecond, time.Since(start))
		time.Sleep(5 * time.Second)
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		assert.Equal(t, "ok", string(b))
		require.NoError(t, resp.Body.Close())
	})
	t.Run("POST without key is not retried after a timeout", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			calls := 0
			base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
				calls++
				<-r.Context().Done()
				return nil, r.Context().Err()
			})
			_, err := (&Transport{Base: base, Policy: Policy{AttemptTimeout: time.Second}}).RoundTrip(newReq(t, "POST", "x", nil))
			assert.ErrorIs(t, err, ErrAttemptTimeout)
			assert.Equal(t, 1, calls)
		})
	})
}

func TestCloseIdleConnections(t *testing.T) {
	var closed bool
	base := closeIdleRT{RoundTripper: script(status(200)), closed: &closed}
	(&Transport{Base: base}).CloseIdleConnections()
	assert.True(t, closed)
	(&Transport{Base: script(status(200))}).CloseIdleConnections() // base without the method: no panic
	(&Transport{}).CloseIdleConnections()
}

type closeIdleRT struct {
	http.RoundTripper
	closed *bool
}

func (c closeIdleRT) CloseIdleConnections() { *c.closed = true }

// A retry's wait: the whole wait on a context that can never be done
// (which sleeps without a timer of its own), and until the cause on one
// that is cancelled meanwhile.
func TestSleep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		require.NoError(t, sleep(context.Background(), time.Second))
		assert.Equal(t, time.Second, time.Since(start))

		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		start = time.Now()
		require.NoError(t, sleep(ctx, time.Second))
		assert.Equal(t, time.Second, time.Since(start))

		stop, cancelCause := context.WithCancelCause(context.Background())
		go func() {
			time.Sleep(100 * time.Millisecond)
			cancelCause(errReset)
		}()
		start = time.Now()
		assert.ErrorIs(t, sleep(stop, time.Hour), errReset)
		assert.Equal(t, 100*time.Millisecond, time.Since(start))
	})
}

package retryhttp

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Transport.Backoff replaces the backoff and the server's Retry-After: the
// waits are the function's, called with each failed attempt's number and
// response.
func TestBackoffFunctionSetsTheWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := script(retryAfter(503, "1"), status(503), status(200))
		var calls []int
		tr := &Transport{Base: base, Budget: NoBudget, Backoff: func(_ *http.Request, n int, resp *http.Response) time.Duration {
			calls = append(calls, n*10+resp.StatusCode/100)
			return time.Duration(n) * 700 * time.Millisecond
		}}
		resp, err := tr.RoundTrip(newReq(t, "GET", "", nil))
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, []int{15, 25}, calls, "attempt 1 and 2, each with its 503")
		assert.Equal(t, []time.Duration{700 * time.Millisecond, 1400 * time.Millisecond}, base.gaps(), "the function's waits, not Retry-After's 1s")
	})
}

// The function is asked only for a retry that may follow: not after the
// last attempt.
func TestBackoffFunctionNotAskedAfterTheLastAttempt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := script(status(503))
		var calls []int
		tr := &Transport{Base: base, Budget: NoBudget, Policy: Policy{MaxAttempts: 2},
			Backoff: func(_ *http.Request, n int, _ *http.Response) time.Duration {
				calls = append(calls, n)
				return time.Second
			}}
		resp, err := tr.RoundTrip(newReq(t, "GET", "", nil))
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, 2, base.attempts())
		assert.Equal(t, []int{1}, calls)
	})
}

// A negative wait is none, and MaxElapsed still bounds what the function
// asks for.
func TestBackoffFunctionIsBoundedByMaxElapsed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := script(status(503))
		waits := []time.Duration{-time.Second, time.Hour}
		tr := &Transport{Base: base, Budget: NoBudget, Backoff: func(_ *http.Request, n int, _ *http.Response) time.Duration { return waits[n-1] }}
		resp, err := tr.RoundTrip(newReq(t, "GET", "", nil))
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, 2, base.attempts(), "the second wait would pass MaxElapsed")
		assert.Equal(t, []time.Duration{0}, base.gaps())
	})
}

// A keyless POST is not retried, unless Policy.RetryNonIdempotent says the
// API is safe to call twice, per Transport or per request.
func TestRetryNonIdempotentOptIn(t *testing.T) {
	reset := fail(&os.SyscallError{Syscall: "read", Err: syscall.ECONNRESET})
	for _, tc := range []struct {
		name     string
		policy   Policy
		ctx      func(context.Context) context.Context
		steps    []step
		attempts int
	}{
		{"503, default", noWait, nil, []step{status(503), status(200)}, 1},
		{"429, default", noWait, nil, []step{status(429), status(200)}, 1},
		{"reset, default", noWait, nil, []step{reset, status(200)}, 1},
		{"503, opted in", Policy{BaseDelay: 1, RetryNonIdempotent: true}, nil, []step{status(503), status(200)}, 2},
		{"reset, opted in", Policy{BaseDelay: 1, RetryNonIdempotent: true}, nil, []step{reset, status(200)}, 2},
		{"503, opted in for the request", noWait, func(ctx context.Context) context.Context {
			return WithPolicy(ctx, Policy{BaseDelay: 1, RetryNonIdempotent: true})
		}, []step{status(503), status(200)}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := script(tc.steps...)
			tr := &Transport{Base: base, Policy: tc.policy, Budget: NoBudget}
			req := newReq(t, "POST", "order", nil)
			if tc.ctx != nil {
				req = req.WithContext(tc.ctx(req.Context()))
			}
			resp, err := tr.RoundTrip(req)
			if err == nil {
				resp.Body.Close()
			}
			assert.Equal(t, tc.attempts, base.attempts())
			for _, c := range base.seen() {
				assert.Equal(t, "order", c.body, "each attempt sends the whole body")
				assert.Empty(t, c.header.Get("Idempotency-Key"), "no key is added")
			}
		})
	}
}

// Policy.ExchangeTimeout bounds an attempt to the end of its body, as
// http.Client.Timeout does: late headers are retried, and a body read past
// it fails with a timeout.
func TestExchangeTimeoutBoundsTheBody(t *testing.T) {
	release := make(chan struct{})
	var calls atomic.Int32 // the handler runs on the server's goroutines
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 { // headers late: retried
			select {
			case <-release:
			case <-r.Context().Done():
			}
			return
		}
		w.WriteHeader(200)
		w.Write([]byte("first half "))
		w.(http.Flusher).Flush()
		select { // the rest never comes
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	tr := &Transport{Base: srv.Client().Transport, Budget: NoBudget,
		Policy: Policy{BaseDelay: time.Millisecond, ExchangeTimeout: 300 * time.Millisecond}}
	defer tr.CloseIdleConnections()
	req, _ := http.NewRequest("GET", srv.URL, nil)
	resp, err := tr.RoundTrip(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	assert.Equal(t, "first half ", string(got))
	require.Error(t, err)
	assert.True(t, errors.Is(err, ErrAttemptTimeout) && os.IsTimeout(err), "%v", err)
	assert.Equal(t, int32(2), calls.Load())
}

// A body read within ExchangeTimeout is whole, and closing it stops the
// timer.
func TestExchangeTimeoutLeavesAQuickBodyAlone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := &Transport{Base: script(status(200)), Policy: Policy{ExchangeTimeout: time.Second}}
		resp, err := tr.RoundTrip(newReq(t, "GET", "", nil))
		require.NoError(t, err)
		time.Sleep(500 * time.Millisecond)
		got, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		assert.Equal(t, "attempt 1", string(got))
		resp.Body.Close()
	})
}

// Policy.BufferStreams makes a small body of unknown length replayable,
// sent with its length; a longer one is sent once, whole.
func TestBufferStreams(t *testing.T) {
	stream := func(s string) io.Reader { return io.MultiReader(strings.NewReader(s)) } // hides the length
	for _, tc := range []struct {
		name     string
		policy   Policy
		body     string
		attempts int
	}{
		{"off: streamed once", Policy{BaseDelay: 1}, "small", 1},
		{"on: buffered and retried", Policy{BaseDelay: 1, BufferStreams: true}, "small", 2},
		{"on, empty", Policy{BaseDelay: 1, BufferStreams: true}, "", 2},
		{"on, too long: streamed once", Policy{BaseDelay: 1, BufferStreams: true, MaxBufferedBody: 4}, "longer than four", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var lengths []int64
			base := script(status(503), status(200))
			rec := roundTripFunc(func(r *http.Request) (*http.Response, error) {
				lengths = append(lengths, r.ContentLength)
				return base.RoundTrip(r)
			})
			req, err := http.NewRequest("PUT", "http://api.test/x", stream(tc.body))
			require.NoError(t, err)
			require.Equal(t, int64(0), req.ContentLength, "a length net/http does not know")
			resp, err := (&Transport{Base: rec, Policy: tc.policy, Budget: NoBudget}).RoundTrip(req)
			require.NoError(t, err)
			resp.Body.Close()
			require.Equal(t, tc.attempts, base.attempts())
			for i, c := range base.seen() {
				assert.Equal(t, tc.body, c.body, "attempt %d sends the whole body", i+1)
			}
			if tc.attempts == 2 {
				assert.Equal(t, []int64{int64(len(tc.body)), int64(len(tc.body))}, lengths, "sent with its length")
			}
		})
	}
}

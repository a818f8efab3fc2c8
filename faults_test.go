package retryhttp_test

// Tests of the promises the Transport keeps under faults, over
// real loopback connections.

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retryhttp/retryhttp"
	rt "github.com/retryhttp/retryhttp/retryhttptest"
)

// net/http resends a replayable request itself when a reused HTTP/1
// connection dies before the response: the server sees it, so the
// Transport counts it, in the metrics and toward MaxAttempts.
func TestHiddenResendsAreCounted(t *testing.T) {
	t.Run("counted as attempts", func(t *testing.T) {
		srv := rt.Start(t, rt.Script{"/": {rt.Status(200), rt.Hangup(), rt.Status(200)}}, rt.Options{})
		reg := prometheus.NewRegistry()
		m, err := retryhttp.NewMetrics(reg, retryhttp.MetricsOptions{})
		require.NoError(t, err)
		c := client(t, srv, &retryhttp.Transport{Policy: retryhttp.Policy{MaxAttempts: 1}, Hooks: []retryhttp.Hook{m}})
		for range 2 {
			resp, err := c.Get(srv.URL + "/")
			require.NoError(t, err)
			readAll(resp) // so the connection is reused
		}
		require.Len(t, srv.Requests(), 3, "net/http resent the second request after the hangup")
		assert.Equal(t, 3.0, sumOf(t, reg, "retryhttp_attempts_total"), "every send the server saw is an attempt")
	})
	t.Run("and bound by MaxAttempts", func(t *testing.T) {
		// The second request meets a hangup, net/http resends it and gets a
		// 503: that is its second attempt, so with MaxAttempts 2 the
		// Transport does not send a third.
		srv := rt.Start(t, rt.Script{"/": {rt.Status(200), rt.Hangup(), rt.Status(503), rt.Status(200)}}, rt.Options{})
		var attempts []int
		c := client(t, srv, &retryhttp.Transport{Policy: retryhttp.Policy{MaxAttempts: 2, BaseDelay: time.Millisecond},
			Hooks: []retryhttp.Hook{retryhttp.HookFunc(func(_ context.Context, e retryhttp.Event) {
				if e.Kind == retryhttp.EventRetry || e.Kind == retryhttp.EventGiveUp {
					attempts = append(attempts, e.Attempt)
				}
			})}})
		resp, err := c.Get(srv.URL + "/")
		require.NoError(t, err)
		readAll(resp)
		resp, err = c.Get(srv.URL + "/")
		require.NoError(t, err)
		readAll(resp)
		assert.Equal(t, 503, resp.StatusCode)
		assert.Len(t, srv.Requests(), 3, "1 + 2 on the wire, as MaxAttempts says")
		assert.Equal(t, []int{2}, attempts, "the give-up names the resend as attempt 2")
	})
}

// A keyed POST whose answer is lost on a reused connection: net/http would
// resend it by itself inside the round trip. MaxAttempts is the number of
// sends the server sees, so under an upper layer that retries too (the
// same key again: this Transport sends once), S upper attempts over R make
// at most R + S − 1 sends; over HTTP/1.1 and HTTP/2.
func TestMaxAttemptsBoundsTheSendsOnTheWire(t *testing.T) {
	protocols(t, func(t *testing.T, h2 bool) {
		for _, c := range []struct {
			name  string
			steps []rt.Step // after a first 200 that leaves the connection idle
			max   int
			sends int // of the keyed POST, at the server
		}{
			{"one attempt", []rt.Step{rt.DropResponse(), rt.Status(200)}, 1, 1},
			{"two attempts", []rt.Step{rt.DropResponse(), rt.DropResponse(), rt.Status(200)}, 2, 2},
		} {
			t.Run(c.name, func(t *testing.T) {
				srv := rt.Start(t, rt.Script{"/warm": {rt.Status(200)}, "/charge": c.steps}, rt.Options{HTTP2: h2})
				hc := client(t, srv, &retryhttp.Transport{Budget: retryhttp.NoBudget,
					Policy: retryhttp.Policy{MaxAttempts: c.max, BaseDelay: time.Millisecond}})
				resp, err := hc.Get(srv.URL + "/warm")
				require.NoError(t, err)
				readAll(resp) // the POST goes on this connection, reused
				req, err := http.NewRequest("POST", srv.URL+"/charge", strings.NewReader(`{"amount":100}`))
				require.NoError(t, err)
				req.Header.Set("Idempotency-Key", "charge-1")
				_, err = hc.Do(req)
				require.Error(t, err, "every send lost its answer")
				assert.Len(t, srv.RequestsTo("/charge"), c.sends, "MaxAttempts %d", c.max)
				assert.Equal(t, c.sends, srv.Effects.Count("charge-1"), "each send the server saw ran the handler")
			})
		}
		t.Run("hedged copies", func(t *testing.T) {
			// The first copy's answer is lost on the reused connection, and
			// so is the next send's: the retry after the race is the second
			// and last attempt, with no resend of the copy between them.
			srv := rt.Start(t, rt.Script{"/warm": {rt.Status(200)}, "/charge": {rt.DropResponse(), rt.DropResponse(), rt.Status(200)}}, rt.Options{HTTP2: h2})
			hc := client(t, srv, &retryhttp.Transport{Budget: retryhttp.NoBudget, Hedge: &retryhttp.Hedging{Delay: time.Second, Unsafe: true},
				Policy: retryhttp.Policy{MaxAttempts: 2, BaseDelay: time.Millisecond}, Logger: slog.New(slog.DiscardHandler)})
			resp, err := hc.Get(srv.URL + "/warm")
			require.NoError(t, err)
			readAll(resp)
			req, err := http.NewRequest("POST", srv.URL+"/charge", strings.NewReader(`{"amount":100}`))
			require.NoError(t, err)
			req.Header.Set("Idempotency-Key", "charge-2")
			if resp, err := hc.Do(req); err == nil {
				readAll(resp)
			}
			assert.Len(t, srv.RequestsTo("/charge"), 2, "MaxAttempts 2")
		})
		t.Run("R + S - 1 under an upper layer", func(t *testing.T) {
			const R, S = 3, 2
			srv := rt.Start(t, rt.Script{"/charge": {rt.Status(503), rt.Status(503), rt.Status(503), rt.DropResponse(), rt.DropResponse(), rt.Status(200)}}, rt.Options{HTTP2: h2})
			hc := client(t, srv, &retryhttp.Transport{Budget: retryhttp.NoBudget,
				Policy: retryhttp.Policy{MaxAttempts: R, BaseDelay: time.Millisecond}, Logger: slog.New(slog.DiscardHandler)})
			for range S { // the upper layer: the same call, the same key, again
				req, err := http.NewRequest("POST", srv.URL+"/charge", strings.NewReader(`{"amount":100}`))
				require.NoError(t, err)
				req.Header.Set("Idempotency-Key", "order-7")
				if resp, err := hc.Do(req); err == nil {
					readAll(resp)
				}
			}
			assert.LessOrEqual(t, len(srv.RequestsTo("/charge")), R+S-1, "sends at the server")
		})
	})
}

// Discarded error bodies up to the drain bound are read so their
// connection is reused: 64 KiB error pages cost no connection per retry.
func TestLargeErrorBodiesReuseConnections(t *testing.T) {
	var conns atomic.Int32
	body := strings.Repeat("e", 64<<10)
	var n atomic.Int32
	ts := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1)%2 == 1 {
			w.WriteHeader(503)
			io.WriteString(w, body)
			return
		}
		io.WriteString(w, "ok")
	}))
	ts.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	ts.Start()
	defer ts.Close()
	tr := &retryhttp.Transport{Base: ts.Client().Transport.(*http.Transport).Clone(), Budget: retryhttp.NoBudget,
		Policy: retryhttp.Policy{BaseDelay: time.Microsecond, MaxDelay: time.Microsecond}}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr}
	for range 300 {
		resp, err := c.Get(ts.URL)
		require.NoError(t, err)
		require.Equal(t, 200, resp.StatusCode)
		readAll(resp)
	}
	assert.Equal(t, int32(600), n.Load())
	assert.Equal(t, int32(1), conns.Load(), "300 retries over one connection")
}

// A drop-in RoundTripper keeps net/http's error semantics: a timeout is
// still a timeout to os.IsTimeout, net.Error and url.Error.
func TestTimeoutsStayTimeouts(t *testing.T) {
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
	}))
	defer slow.Close()
	for _, tc := range []struct {
		name string
		tr   func() *retryhttp.Transport
	}{
		{"base's response header timeout", func() *retryhttp.Transport {
			base := slow.Client().Transport.(*http.Transport).Clone()
			base.ResponseHeaderTimeout = 20 * time.Millisecond
			return &retryhttp.Transport{Base: base, Policy: retryhttp.Policy{MaxAttempts: 2, BaseDelay: time.Millisecond}}
		}},
		{"AttemptTimeout", func() *retryhttp.Transport {
			return &retryhttp.Transport{Base: slow.Client().Transport.(*http.Transport).Clone(),
				Policy: retryhttp.Policy{MaxAttempts: 2, BaseDelay: time.Millisecond, AttemptTimeout: 20 * time.Millisecond}}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := tc.tr()
			defer tr.CloseIdleConnections()
			_, err := (&http.Client{Transport: tr}).Get(slow.URL)
			require.Error(t, err)
			assert.True(t, os.IsTimeout(err), "os.IsTimeout(%v)", err)
			var ne net.Error
			require.ErrorAs(t, err, &ne)
			assert.True(t, ne.Timeout())
			var ue interface{ Timeout() bool }
			require.ErrorAs(t, err, &ue)
			assert.True(t, ue.Timeout())
			var re *retryhttp.RetryError
			require.ErrorAs(t, err, &re)
			assert.Equal(t, 2, re.Attempts)
		})
	}
	t.Run("a caller's deadline too", func(t *testing.T) {
		tr := &retryhttp.Transport{Base: slow.Client().Transport.(*http.Transport).Clone()}
		defer tr.CloseIdleConnections()
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, "GET", slow.URL, nil)
		_, err := (&http.Client{Transport: tr}).Do(req)
		assert.True(t, os.IsTimeout(err), "os.IsTimeout(%v)", err)
		assert.True(t, errors.Is(err, context.DeadlineExceeded))
	})
	t.Run("not a timeout stays not a timeout", func(t *testing.T) {
		ln, _ := net.Listen("tcp", "127.0.0.1:0")
		addr := ln.Addr().String()
		ln.Close()
		_, err := (&http.Client{Transport: &retryhttp.Transport{Policy: retryhttp.Policy{MaxAttempts: 1}}}).Get("http://" + addr)
		require.Error(t, err)
		assert.False(t, os.IsTimeout(err))
	})
}

// sumOf adds up every series of a counter, or of a histogram its count.
func sumOf(t *testing.T, reg *prometheus.Registry, name string) (v float64) {
	t.Helper()
	fams, err := reg.Gather()
	require.NoError(t, err)
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			if f.GetName() == name {
				v += m.GetCounter().GetValue() + float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return v
}

func readAll(resp *http.Response) {
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
}

// A 503 whose body trickles in is not drained for long: the drain stops
// after a short time and closes the connection, so the retry follows at
// once instead of after the whole body (25 s at this rate). HTTP/1.1 and
// HTTP/2 alike.
func TestSlowErrorBodyDrainIsBounded(t *testing.T) {
	for _, h2 := range []bool{false, true} {
		name := map[bool]string{false: "HTTP/1.1", true: "HTTP/2"}[h2]
		t.Run(name, func(t *testing.T) {
			release := make(chan struct{})
			var n atomic.Int32
			ts := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if n.Add(1) > 1 {
					io.WriteString(w, "ok")
					return
				}
				w.WriteHeader(503)
				chunk := strings.Repeat("e", 512)
				for range 512 { // 256 KiB, 512 bytes every 50 ms
					if _, err := io.WriteString(w, chunk); err != nil {
						return
					}
					w.(http.Flusher).Flush()
					select {
					case <-release:
						return
					case <-r.Context().Done():
						return
					case <-time.After(50 * time.Millisecond):
					}
				}
			}))
			ts.EnableHTTP2 = h2
			if h2 {
				ts.StartTLS()
			} else {
				ts.Start()
			}
			defer ts.Close()
			defer close(release)
			base := ts.Client().Transport.(*http.Transport).Clone()
			defer base.CloseIdleConnections()
			tr := &retryhttp.Transport{Base: base, Policy: retryhttp.Policy{BaseDelay: time.Millisecond, MaxAttempts: 2}}
			start := time.Now()
			resp, err := (&http.Client{Transport: tr}).Get(ts.URL)
			require.NoError(t, err)
			readAll(resp)
			took := time.Since(start)
			assert.Equal(t, 200, resp.StatusCode)
			assert.Equal(t, int32(2), n.Load())
			assert.Less(t, took, 5*time.Second, "the drain of the trickling body was not cut short")
		})
	}
}

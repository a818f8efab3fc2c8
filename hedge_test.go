package retryhttp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// stragglerServer answers the first attempt (X-Attempt: 1) only when the
// request is cancelled (or after a second), and every other one at once.
// It goes by the attempt, not by arrival: on a loaded machine the hedge's
// stream can reach a handler before the first's.
func stragglerServer(t *testing.T, http2 bool) (*httptest.Server, *atomic.Int64, chan struct{}) {
	var n atomic.Int64
	cancelled := make(chan struct{}, 1)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1); r.Header.Get("X-Attempt") == "1" {
			select {
			case <-r.Context().Done():
				cancelled <- struct{}{}
				return
			case <-time.After(time.Second):
			}
		}
		io.WriteString(w, "copy "+r.Header.Get("X-Attempt"))
	}))
	start(t, srv, http2)
	return srv, &n, cancelled
}

// start starts srv, over HTTP/2 (and TLS) or HTTP/1.1, until the test ends.
func start(t *testing.T, srv *httptest.Server, http2 bool) {
	if http2 {
		srv.EnableHTTP2 = true
		srv.StartTLS()
	} else {
		srv.Start()
	}
	t.Cleanup(srv.Close)
}

// A slow first copy is hedged after Delay: the hedge's response wins, the
// first copy is cancelled, and the metrics count one hedge sent and won;
// over HTTP/1.1 and HTTP/2.
func TestHedgeWinsOverLoopback(t *testing.T) {
	for _, h2 := range []bool{false, true} {
		t.Run(fmt.Sprintf("http2=%v", h2), func(t *testing.T) {
			srv, n, cancelled := stragglerServer(t, h2)
			base := srv.Client().Transport.(*http.Transport).Clone()
			defer base.CloseIdleConnections()
			reg := prometheus.NewRegistry()
			m, err := NewMetrics(reg, MetricsOptions{})
			require.NoError(t, err)
			var events []EventKind
			var mu sync.Mutex
			tr := &Transport{Base: base, Hedge: &Hedging{Delay: 20 * time.Millisecond}, AttemptHeader: "X-Attempt", Hooks: []Hook{m}}
			tr.AddHook(eventsHook(func(e Event) { mu.Lock(); events = append(events, e.Kind); mu.Unlock() }))

			start := time.Now()
			resp, err := (&http.Client{Transport: tr}).Get(srv.URL)
			require.NoError(t, err)
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			assert.Equal(t, "copy 2", string(body), "the hedge answered")
			assert.Less(t, time.Since(start), 900*time.Millisecond, "the straggler was not waited for")
			if h2 {
				assert.Equal(t, 2, resp.ProtoMajor)
			}
			select {
			case <-cancelled:
			case <-time.After(2 * time.Second):
				t.Fatal("the first copy was not cancelled")
			}
			assert.Equal(t, int64(2), n.Load())
			assert.Equal(t, 1.0, testutil.ToFloat64(m.hedges))
			assert.Equal(t, 1.0, testutil.ToFloat64(m.won))
			mu.Lock()
			assert.Equal(t, []EventKind{EventHedge, EventHedgeWon, EventDone}, events)
			mu.Unlock()
		})
	}
}

// slowFirst answers each request after the delay its attempt number
// maps to, with the status given, counting what it is sent.
type slowFirst struct {
	delays map[int]time.Duration // by attempt number; missing: at once
	status map[int]int           // by attempt number; missing: 200
	mu     sync.Mutex
	sent   []string // "METHOD attempt"
}

func (s *slowFirst) RoundTrip(r *http.Request) (*http.Response, error) {
	n := AttemptFromContext(r.Context())
	s.mu.Lock()
	s.sent = append(s.sent, fmt.Sprintf("%s %d", r.Method, n))
	s.mu.Unlock()
	if d := s.delays[n]; d > 0 {
		select {
		case <-time.After(d):
		case <-r.Context().Done():
			return nil, context.Cause(r.Context())
		}
	}
	code := 200
	if c, ok := s.status[n]; ok {
		code = c
	}
	return &http.Response{StatusCode: code, Body: io.NopCloser(strings.NewReader("ok")), Request: r}, nil
}

func (s *slowFirst) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.sent)
}

// Which requests are hedged: safe methods; PUT, DELETE and keyed requests
// only with Unsafe; a POST or PATCH without a key never.
func TestHedgeOnlyWhatMayBeSentTwice(t *testing.T) {
	cases := []struct {
		method string
		keyed  bool
		unsafe bool
		want   int
	}{
		{"GET", false, false, 2}, {"HEAD", false, false, 2},
		{"PUT", false, false, 1}, {"PUT", false, true, 2},
		{"POST", true, false, 1}, {"POST", true, true, 2},
		{"POST", false, true, 1}, {"PATCH", false, true, 1},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%s keyed=%v unsafe=%v", c.method, c.keyed, c.unsafe), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				base := &slowFirst{delays: map[int]time.Duration{1: time.Second}}
				tr := &Transport{Base: base, Hedge: &Hedging{Delay: 10 * time.Millisecond, Unsafe: c.unsafe}, Budget: NoBudget}
				var h http.Header
				if c.keyed {
					h = http.Header{"Idempotency-Key": {"k1"}}
				}
				resp, err := tr.RoundTrip(newReq(t, c.method, "body", h))
				require.NoError(t, err)
				resp.Body.Close()
				synctest.Wait()
				assert.Equal(t, c.want, base.count(), "%v", base.sent)
			})
		})
	}
}

// Hedges are attempts: with MaxAttempts 2, a hedge and a retry do not
// multiply; an empty Budget sends no hedge.
func TestHedgeBounds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := &slowFirst{delays: map[int]time.Duration{1: 50 * time.Millisecond, 2: 50 * time.Millisecond},
			status: map[int]int{1: 503, 2: 503, 3: 503}}
		tr := &Transport{Base: base, Hedge: &Hedging{Delay: 10 * time.Millisecond, MaxHedges: 3}, Budget: NoBudget,
			Policy: Policy{MaxAttempts: 2, BaseDelay: time.Millisecond}, Logger: slog.New(slog.DiscardHandler)}
		resp, err := tr.RoundTrip(newReq(t, "GET", "", nil))
		require.NoError(t, err)
		assert.Equal(t, 503, resp.StatusCode)
		resp.Body.Close()
		synctest.Wait()
		assert.Equal(t, []string{"GET 1", "GET 2"}, base.sent, "two attempts in all, the hedge one of them")

		empty, err := NewBudget(BudgetOptions{Ratio: 1e-9, MinPerSecond: 1e-9})
		require.NoError(t, err)
		base = &slowFirst{delays: map[int]time.Duration{1: 50 * time.Millisecond}}
		tr = &Transport{Base: base, Hedge: &Hedging{Delay: 10 * time.Millisecond}, Budget: empty}
		resp, err = tr.RoundTrip(newReq(t, "GET", "", nil))
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, []string{"GET 1"}, base.sent, "no hedge from an empty budget")
	})
}

// The zero Hedging learns the host's latencies: no hedge until 20 are
// known, then one after the 95th percentile.
func TestHedgeLearnsTheQuantile(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := &Hedging{}
		fast := &slowFirst{delays: map[int]time.Duration{1: 10 * time.Millisecond}}
		tr := &Transport{Base: fast, Hedge: h, Budget: NoBudget}
		for range 19 {
			resp, err := tr.RoundTrip(newReq(t, "GET", "", nil))
			require.NoError(t, err)
			resp.Body.Close()
		}
		u := newReq(t, "GET", "", nil).URL
		_, known := h.delay(h.latenciesOf(u))
		assert.False(t, known, "19 latencies: not yet")
		resp, err := tr.RoundTrip(newReq(t, "GET", "", nil))
		require.NoError(t, err)
		resp.Body.Close()
		d, known := h.delay(h.latenciesOf(u))
		require.True(t, known)
		assert.InDelta(t, float64(10*time.Millisecond), float64(d), float64(1500*time.Microsecond), "p95 of 10 ms answers")
		assert.Equal(t, 20, fast.count(), "no hedge while learning")

		slow := &slowFirst{delays: map[int]time.Duration{1: time.Second}}
		tr.Base = slow
		start := time.Now()
		resp, err = tr.RoundTrip(newReq(t, "GET", "", nil))
		require.NoError(t, err)
		resp.Body.Close()
		assert.Less(t, time.Since(start), 20*time.Millisecond, "hedged after the learnt p95")
		synctest.Wait()
		assert.Equal(t, 2, slow.count())
	})
}

// An invalid Hedging fails every request, hedged or not, as an invalid
// Policy does: nothing is sent and the request's body is closed. A valid
// one at the edges of its ranges is accepted.
func TestHedgingValidated(t *testing.T) {
	for _, h := range []*Hedging{{Delay: -1}, {Quantile: 1}, {Quantile: 1.5}, {Quantile: -0.1}, {Quantile: math.NaN()}, {MaxHedges: -1}} {
		assert.ErrorContains(t, h.Validate(), "retryhttp: Hedging:", "Validate of %+v", h)
		for _, method := range []string{"GET", "PUT", "POST", "PATCH", "DELETE"} {
			base := &slowFirst{}
			tr := &Transport{Base: base, Hedge: h}
			body := &closeTracker{Reader: strings.NewReader("x")}
			req := newReq(t, method, "", nil)
			req.Body = body
			resp, err := tr.RoundTrip(req)
			require.Error(t, err, "%s with %+v", method, h)
			assert.Nil(t, resp)
			assert.ErrorContains(t, err, "retryhttp: Hedging:")
			assert.Empty(t, base.sent, "%s with %+v: sent", method, h)
			assert.True(t, body.closed, "%s with %+v: body left open", method, h)
		}
	}
	for _, h := range []*Hedging{{}, {Delay: time.Nanosecond, Quantile: 0.999, MaxHedges: 100, Unsafe: true}} {
		assert.NoError(t, h.Validate(), "Validate of %+v", h)
		base := &slowFirst{}
		resp, err := (&Transport{Base: base, Hedge: h}).RoundTrip(newReq(t, "POST", "", nil))
		require.NoError(t, err, "%+v", h)
		resp.Body.Close()
		assert.Len(t, base.sent, 1)
	}
}

// Whatever the faults, the timing, the policy and the hedging, a POST or
// PATCH without an Idempotency-Key that may have reached the server is
// never sent twice: 300 random runs.
func TestNoKeylessUnsafeRequestSentTwice(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for run := range 300 {
		method := []string{"GET", "PUT", "POST", "PATCH", "DELETE"}[rng.IntN(5)]
		inject := rng.IntN(2) == 0
		var hedge *Hedging
		if rng.IntN(2) == 0 {
			hedge = &Hedging{Delay: time.Duration(1+rng.IntN(20)) * time.Millisecond, MaxHedges: 1 + rng.IntN(3), Unsafe: rng.IntN(2) == 0}
		}
		maxAttempts := 1 + rng.IntN(5)
		seed := rng.Uint64()
		synctest.Test(t, func(t *testing.T) {
			frng := rand.New(rand.NewPCG(seed, 0))
			var mu sync.Mutex
			sent := 0
			base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
				mu.Lock()
				sent++
				fault := frng.IntN(4)
				delay := time.Duration(frng.IntN(40)) * time.Millisecond
				mu.Unlock()
				select {
				case <-time.After(delay):
				case <-r.Context().Done():
					return nil, r.Context().Err()
				}
				switch fault {
				case 0:
					return nil, errReset
				case 1:
					return &http.Response{StatusCode: 503, Body: http.NoBody, Request: r}, nil
				}
				return &http.Response{StatusCode: 200, Body: http.NoBody, Request: r}, nil
			})
			tr := &Transport{Base: base, Hedge: hedge, InjectIdempotencyKey: inject, Budget: NoBudget,
				Policy: Policy{MaxAttempts: maxAttempts, BaseDelay: time.Millisecond}, Logger: slog.New(slog.DiscardHandler)}
			resp, err := tr.RoundTrip(newReq(t, method, "payload", nil))
			if err == nil {
				resp.Body.Close()
			} else if !errors.Is(err, errReset) {
				var re *RetryError
				require.ErrorAs(t, err, &re)
			}
			synctest.Wait()
			keyless := !inject && (method == "POST" || method == "PATCH")
			mu.Lock()
			defer mu.Unlock()
			if keyless && sent > 1 {
				t.Fatalf("run %d: a keyless %s was sent %d times (hedge %+v, %d attempts)", run, method, sent, hedge, maxAttempts)
			}
			if sent > maxAttempts {
				t.Fatalf("run %d: %d sends for MaxAttempts %d (hedge %+v)", run, sent, maxAttempts, hedge)
			}
		})
	}
}

// faultServer runs faults[i] on its request i+1 (an abort of the
// connection, at once or after a while, or a stall until the client goes
// away) and answers 200 once they run out, counting every request it gets.
func faultServer(t *testing.T, http2 bool, faults ...func(*http.Request)) (*httptest.Server, *atomic.Int64) {
	var n atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if i := int(n.Add(1)) - 1; i < len(faults) {
			faults[i](r)
		}
		io.WriteString(w, "ok")
	}))
	start(t, srv, http2)
	return srv, &n
}

// abortAfter cuts the request's connection (HTTP/1) or stream (HTTP/2)
// after d, with no response.
func abortAfter(d time.Duration) func(*http.Request) {
	return func(*http.Request) {
		time.Sleep(d)
		panic(http.ErrAbortHandler)
	}
}

// stall holds the request until the client gives up on it.
func stall(r *http.Request) {
	select {
	case <-r.Context().Done():
	case <-time.After(5 * time.Second):
	}
	panic(http.ErrAbortHandler)
}

// A copy that fails with a network error or a timeout is an attempt's
// outcome like any other: with hedging on, a GET ends as it does without
// hedging (the same status or reason, the same sends at the server, the
// same attempts, a hedge standing for a retry), over HTTP/1.1 and HTTP/2. Canceled is only
// for a caller whose context ended.
func TestHedgeKeepsTheRetryRulesAfterNetworkErrors(t *testing.T) {
	cut30 := abortAfter(30 * time.Millisecond)
	cases := []struct {
		name    string
		faults  []func(*http.Request)
		refused bool // a closed port instead of the server
		want    string
		sends   int64
		retries int
	}{
		{name: "closed at once", faults: []func(*http.Request){abortAfter(0)}, want: "200", sends: 2, retries: 1},
		{name: "both copies closed after 30ms", faults: []func(*http.Request){cut30, cut30}, want: "200", sends: 3, retries: 2},
		{name: "refused", refused: true, want: "gave up: attempts after 3 attempts", retries: 2},
		{name: "both copies past AttemptTimeout", faults: []func(*http.Request){stall, stall}, want: "200", sends: 3, retries: 2},
	}
	for _, h2 := range []bool{false, true} {
		for _, c := range cases {
			t.Run(fmt.Sprintf("%s/http2=%v", c.name, h2), func(t *testing.T) {
				for _, hedge := range []*Hedging{nil, {Delay: 10 * time.Millisecond}} {
					srv, n := faultServer(t, h2, c.faults...)
					url := srv.URL
					if c.refused {
						url = closedURL(t)
					}
					base := srv.Client().Transport.(*http.Transport).Clone()
					tr := &Transport{Base: base, Hedge: hedge, Budget: NoBudget,
						Policy: Policy{MaxAttempts: 3, BaseDelay: time.Millisecond, AttemptTimeout: 100 * time.Millisecond}}
					var mu sync.Mutex
					kinds := map[EventKind]int{}
					tr.AddHook(eventsHook(func(e Event) { mu.Lock(); kinds[e.Kind]++; mu.Unlock() }))
					req, err := http.NewRequest("GET", url, nil)
					require.NoError(t, err)
					resp, err := tr.RoundTrip(req)
					var got string
					if err == nil {
						resp.Body.Close()
						got = strconv.Itoa(resp.StatusCode)
					} else {
						var re *RetryError
						require.ErrorAs(t, err, &re)
						got = fmt.Sprintf("gave up: %s after %d attempts", re.Reason, re.Attempts)
					}
					base.CloseIdleConnections()
					assert.Equal(t, c.want, got, "hedging %v: %v", hedge != nil, err)
					assert.Equal(t, c.sends, n.Load(), "hedging %v: sends at the server", hedge != nil)
					mu.Lock()
					// A hedge is an attempt sent instead of a retry, never on top of one.
					assert.Equal(t, c.retries, kinds[EventRetry]+kinds[EventHedge], "hedging %v: retries and hedges", hedge != nil)
					assert.Equal(t, 1, kinds[EventDone], "hedging %v", hedge != nil)
					mu.Unlock()
				}
			})
		}
	}
}

// closedURL is the address of a port nothing listens on.
func closedURL(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	ln.Close()
	return "http://" + addr
}

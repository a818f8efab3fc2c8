package retryhttp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retryhttp/retryhttp/internal/circuit"
)

// transitions records a breaker's state changes.
type transitions struct {
	mu  sync.Mutex
	log []string
}

func (tr *transitions) record(host string, from, to CircuitState) {
	tr.mu.Lock()
	tr.log = append(tr.log, fmt.Sprintf("%s: %v -> %v", host, from, to))
	tr.mu.Unlock()
}

func (tr *transitions) get() []string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return append([]string(nil), tr.log...)
}

// single sends one GET with retries off, so each RoundTrip is one attempt.
func single(t *testing.T, tr *Transport, url string) (*http.Response, error) {
	req, err := http.NewRequest("GET", url, nil)
	require.NoError(t, err)
	resp, err := tr.RoundTrip(req)
	if err == nil {
		resp.Body.Close()
	}
	return resp, err
}

func TestBreakerStateMachine(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var log transitions
		b, err := NewBreaker(BreakerOptions{Failures: 3, OpenFor: 10 * time.Second, Probes: 2, OnStateChange: log.record})
		require.NoError(t, err)
		base := script(status(503), status(503), status(503), status(200))
		tr := &Transport{Base: base, Breaker: b, Policy: Policy{MaxAttempts: 1}}
		const host = "http://api.test"

		for range 3 {
			resp, err := single(t, tr, "http://api.test/x")
			require.NoError(t, err)
			assert.Equal(t, 503, resp.StatusCode)
		}
		assert.Equal(t, CircuitOpen, b.State(host), "tripped by 3 consecutive 503s")

		_, err = single(t, tr, "http://api.test/x")
		assert.ErrorIs(t, err, ErrCircuitOpen)
		var re *RetryError
		require.ErrorAs(t, err, &re)
		assert.Equal(t, ReasonCircuitOpen, re.Reason)
		assert.Equal(t, 0, re.Attempts)
		assert.Equal(t, 3, base.attempts(), "open: no network touched")

		time.Sleep(10*time.Second + time.Millisecond) // open lasts OpenFor, boundary included
		assert.Equal(t, CircuitHalfOpen, b.State(host))
		for range 2 { // two probes, both succeed (the script now answers 200)
			resp, err := single(t, tr, "http://api.test/x")
			require.NoError(t, err)
			assert.Equal(t, 200, resp.StatusCode)
		}
		assert.Equal(t, CircuitClosed, b.State(host))
		assert.Equal(t, []string{
			host + ": closed -> open",
			host + ": open -> half-open",
			host + ": half-open -> closed",
		}, log.get())
	})
}

func TestBreakerHalfOpenFailureReopens(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, _ := NewBreaker(BreakerOptions{Failures: 2, OpenFor: 5 * time.Second})
		base := script(fail(errReset))
		tr := &Transport{Base: base, Breaker: b, Policy: Policy{MaxAttempts: 1}}
		for range 2 {
			_, err := single(t, tr, "http://api.test/")
			assert.ErrorIs(t, err, errReset)
		}
		time.Sleep(5*time.Second + time.Millisecond)
		_, err := single(t, tr, "http://api.test/")
		assert.ErrorIs(t, err, errReset, "the probe goes through")
		assert.Equal(t, CircuitOpen, b.State("http://api.test:80"), "and its failure reopens")
		_, err = single(t, tr, "http://api.test/")
		assert.ErrorIs(t, err, ErrCircuitOpen)
		assert.Equal(t, 3, base.attempts())
	})
}

// A flapping dependency: bursts of failures trip the breaker, and each
// recovery closes it again; requests in the open periods fail fast.
func TestBreakerFlapping(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var log transitions
		b, _ := NewBreaker(BreakerOptions{Failures: 3, OpenFor: 2 * time.Second, OnStateChange: log.record})
		up := true
		base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			if up {
				return &http.Response{StatusCode: 200, Body: http.NoBody, Header: http.Header{}}, nil
			}
			return &http.Response{StatusCode: 502, Body: http.NoBody, Header: http.Header{}}, nil
		})
		tr := &Transport{Base: base, Breaker: b, Policy: Policy{MaxAttempts: 1}}
		fastFails := 0
		for second := range 40 {
			up = (second/5)%2 == 0 // 5 s up, 5 s down
			for range 4 {
				if _, err := single(t, tr, "http://flappy.test/"); errors.Is(err, ErrCircuitOpen) {
					fastFails++
				}
				time.Sleep(250 * time.Millisecond)
			}
		}
		got := log.get()
		// Four down periods: each trips, probes while down re-open, and the
		// first probe after recovery closes.
		opens, closes := 0, 0
		for _, s := range got {
			switch s {
			case "http://flappy.test: closed -> open":
				opens++
			case "http://flappy.test: half-open -> closed":
				closes++
			}
		}
		assert.Equal(t, 4, opens, "%v", got)
		assert.GreaterOrEqual(t, closes, 3, "%v", got)
		assert.Greater(t, fastFails, 40, "requests in the down periods mostly fail fast")
	})
}

func TestBreakerWhatCounts(t *testing.T) {
	for _, tc := range []struct {
		name  string
		step  step
		trips bool
	}{
		{"502", status(502), true},
		{"503", status(503), true},
		{"504", status(504), true},
		{"network error", fail(errReset), true},
		{"429", status(429), false},
		{"404", status(404), false},
		{"500", status(500), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, _ := NewBreaker(BreakerOptions{Failures: 2})
			tr := &Transport{Base: script(tc.step), Breaker: b, Policy: Policy{MaxAttempts: 1}}
			single(t, tr, "https://api.test/")
			single(t, tr, "https://api.test/")
			want := CircuitClosed
			if tc.trips {
				want = CircuitOpen
			}
			assert.Equal(t, want, b.State("https://api.test:443"))
		})
	}
	t.Run("caller cancellation does not count", func(t *testing.T) {
		b, _ := NewBreaker(BreakerOptions{Failures: 1})
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		tr := &Transport{Base: script(fail(context.Canceled)), Breaker: b}
		req, _ := http.NewRequestWithContext(ctx, "GET", "https://api.test/", nil)
		_, err := tr.RoundTrip(req)
		assert.ErrorIs(t, err, context.Canceled)
		assert.Equal(t, CircuitClosed, b.State("https://api.test:443"))
	})
}

func TestBreakerPerHostAndBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, _ := NewBreaker(BreakerOptions{Failures: 1, MaxHosts: 3})
		tr := &Transport{Base: script(status(503)), Breaker: b, Policy: Policy{MaxAttempts: 1}}
		single(t, tr, "http://a.test/")
		assert.Equal(t, CircuitOpen, b.State("http://a.test:80"))
		assert.Equal(t, CircuitClosed, b.State("https://a.test:443"), "scheme and port are part of the host")
		assert.Equal(t, hostOf(mustURL(t, "http://a.test/x").URL), hostOf(mustURL(t, "http://a.test:80/y").URL))
		assert.Equal(t, "https://[::1]", hostOf(mustURL(t, "https://[::1]/").URL).String())
		assert.Equal(t, "http://[::1]:8080", hostOf(mustURL(t, "http://[::1]:8080/").URL).String())
		assert.Equal(t, "https://a.test:8443", hostOf(mustURL(t, "https://a.test:8443/").URL).String())
		for _, h := range []string{"b", "c", "d"} {
			time.Sleep(time.Second) // distinct last-use times
			single(t, tr, "http://"+h+".test/")
		}
		n := 0
		b.eachState(func(string, CircuitState) { n++ })
		assert.Equal(t, 3, n, "at most MaxHosts tracked")
		assert.Equal(t, CircuitClosed, b.State("http://a.test:80"), "the least recently used host was forgotten")
		assert.Equal(t, CircuitOpen, b.State("http://d.test:80"))
	})
	_, err := NewBreaker(BreakerOptions{OpenFor: -1})
	assert.ErrorContains(t, err, "OpenFor -1ns is negative")
	_, err = NewBreaker(BreakerOptions{MaxHosts: -1})
	assert.ErrorContains(t, err, "MaxHosts -1 is negative")
}

// With retries on, an open circuit stops the retry loop: the caller gets
// the last response, and no wait is spent.
func TestBreakerStopsRetries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, _ := NewBreaker(BreakerOptions{Failures: 2})
		base := script(status(503))
		var events []Event
		tr := &Transport{Base: base, Breaker: b, Policy: Policy{Jitter: JitterNone}, Hooks: []Hook{retryHook(func(e Event) { events = append(events, e) })}}
		resp, err := single(t, tr, "http://api.test/")
		require.NoError(t, err)
		assert.Equal(t, 503, resp.StatusCode)
		assert.Equal(t, 2, base.attempts())
		require.Len(t, events, 2)
		assert.Equal(t, ReasonCircuitOpen, events[1].GiveUp)
	})
}

func mustURL(t *testing.T, s string) *http.Request {
	r, err := http.NewRequest("GET", s, nil)
	require.NoError(t, err)
	return r
}

// A circuit that another caller opens while this request waits to retry
// ends the request with the response it already holds, body readable, not
// with an error. The give-up is logged and counted as
// circuit_open, so error, log and metric tell one story.
func TestBreakerOpenedDuringWaitReturnsLastResponse(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, _ := NewBreaker(BreakerOptions{Failures: 2, OpenFor: time.Minute})
		var events []Event
		slow := &Transport{Base: script(status(503)), Breaker: b, Budget: NoBudget,
			Policy: Policy{BaseDelay: time.Second, Jitter: JitterNone},
			Hooks:  []Hook{retryHook(func(e Event) { events = append(events, e) })}}
		done := make(chan struct{})
		var resp *http.Response
		var err error
		req := newReq(t, "GET", "", nil)
		go func() {
			defer close(done)
			resp, err = slow.RoundTrip(req)
		}()
		time.Sleep(500 * time.Millisecond) // the first request is waiting to retry
		other := &Transport{Base: script(status(503)), Breaker: b, Policy: Policy{MaxAttempts: 1}}
		r2, err2 := other.RoundTrip(newReq(t, "GET", "", nil))
		require.NoError(t, err2)
		r2.Body.Close()
		require.Equal(t, CircuitOpen, b.State("http://api.test"), "the second 503 opened the circuit")
		<-done
		require.NoError(t, err, "the caller held a 503: it gets it, not an error")
		assert.Equal(t, 503, resp.StatusCode)
		body, _ := io.ReadAll(resp.Body)
		assert.Equal(t, "attempt 1", string(body), "the kept body is readable")
		resp.Body.Close()
		assert.Same(t, req, resp.Request, "resp.Request is the caller's request, not an attempt's copy")
		require.Len(t, events, 2)
		assert.Equal(t, ReasonNone, events[0].GiveUp)
		assert.Equal(t, ReasonCircuitOpen, events[1].GiveUp)
		assert.Equal(t, 1, events[1].Attempt)
		assert.Same(t, resp, events[1].Response)
	})
}

// A breaker refusing the first attempt is a give-up like any other: one Warn
// record, one hook event, one give_ups_total.
func TestBreakerRefusalIsLoggedAndCounted(t *testing.T) {
	var buf bytes.Buffer
	reg := prometheus.NewRegistry()
	m, _ := NewMetrics(reg, MetricsOptions{})
	b, _ := NewBreaker(BreakerOptions{Failures: 1})
	var events []Event
	tr := &Transport{Base: script(status(503)), Breaker: b, Policy: Policy{MaxAttempts: 1},
		Logger: slog.New(slog.NewJSONHandler(&buf, nil)),
		Hooks:  []Hook{m, retryHook(func(e Event) { events = append(events, e) })}}
	resp, err := tr.RoundTrip(newReq(t, "GET", "", nil))
	require.NoError(t, err)
	resp.Body.Close()
	buf.Reset()
	events = nil
	_, err = tr.RoundTrip(newReq(t, "GET", "", nil))
	require.ErrorIs(t, err, ErrCircuitOpen)
	var re *RetryError
	require.ErrorAs(t, err, &re)
	assert.Equal(t, 0, re.Attempts)
	require.Len(t, events, 1)
	assert.Equal(t, ReasonCircuitOpen, events[0].GiveUp)
	assert.Equal(t, 0, events[0].Attempt)
	assert.ErrorIs(t, events[0].Err, ErrCircuitOpen)
	var rec map[string]any
	require.NoError(t, json.Unmarshal(buf.Bytes(), &rec))
	assert.Equal(t, "WARN", rec["level"])
	assert.Equal(t, "circuit_open", rec["give_up"])
	f := scrape(t, reg)
	assert.Equal(t, 1.0, value(f, "retryhttp_give_ups_total", "reason=circuit_open"))
	assert.Equal(t, 1.0, value(f, "retryhttp_requests_total", "outcome=circuit_open"))
}

// More hosts than MaxHosts: healthy hosts make room, failing ones keep
// their circuits, which open and protect.
func TestBreakerKeepsProtectingPastMaxHosts(t *testing.T) {
	b, _ := NewBreaker(BreakerOptions{Failures: 3, MaxHosts: 16})
	failing := map[string]bool{"h7.test": true, "h50.test": true, "h123.test": true}
	base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		code := 200
		if failing[r.URL.Hostname()] {
			code = 503
		}
		return &http.Response{StatusCode: code, Body: http.NoBody, Header: http.Header{}}, nil
	})
	tr := &Transport{Base: base, Breaker: b, Policy: Policy{MaxAttempts: 1}}
	fastFails := 0
	for round := range 5 {
		for h := range 200 {
			_, err := single(t, tr, fmt.Sprintf("http://h%d.test/", h))
			if errors.Is(err, ErrCircuitOpen) {
				fastFails++
			}
		}
		_ = round
	}
	for h := range failing {
		assert.Equal(t, CircuitOpen, b.State("http://"+h), h)
	}
	assert.Equal(t, 3*2, fastFails, "rounds 4 and 5 fail fast on the three failing hosts")
	n := 0
	b.eachState(func(string, CircuitState) { n++ })
	assert.Equal(t, 16, n)
}

// A host failing 60% of calls with successes between the failures never
// trips the consecutive rule; the ratio rule opens it, and time closes it.
func TestBreakerFailureRatio(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		flaky := func() http.RoundTripper {
			var n atomic.Int64
			return roundTripFunc(func(r *http.Request) (*http.Response, error) {
				code := [...]int{503, 200, 503, 503, 200}[n.Add(1)%5]
				return &http.Response{StatusCode: code, Body: http.NoBody, Request: r}, nil
			})
		}
		run := func(b *Breaker) (refusedAt int) {
			tr := &Transport{Base: flaky(), Breaker: b, Policy: Policy{MaxAttempts: 1}, Logger: slog.New(slog.DiscardHandler)}
			for i := range 200 {
				if _, err := single(t, tr, "http://api.test/x"); err != nil {
					require.ErrorIs(t, err, ErrCircuitOpen)
					return i
				}
				time.Sleep(50 * time.Millisecond)
			}
			return -1
		}
		assert.Equal(t, -1, run(&Breaker{}), "the default, consecutive rule never opens on 60% failures")

		var log transitions
		b, err := NewBreaker(BreakerOptions{FailureRatio: 0.5, Window: 10 * time.Second, MinCalls: 20, OpenFor: 5 * time.Second, OnStateChange: log.record})
		require.NoError(t, err)
		n := run(b)
		assert.True(t, n >= 20 && n <= 25, "the ratio rule opened after %d calls, want soon after MinCalls (20)", n)
		assert.Equal(t, CircuitOpen, b.State("http://api.test"))
		time.Sleep(5*time.Second + time.Millisecond)
		assert.Equal(t, CircuitHalfOpen, b.State("http://api.test"))
		assert.Equal(t, []string{"http://api.test: closed -> open", "http://api.test: open -> half-open"}, log.get())
	})
}

func TestBreakerSettingsValidated(t *testing.T) {
	for _, s := range []BreakerOptions{
		{FailureRatio: -0.1}, {FailureRatio: 1.5}, {FailureRatio: math.NaN()},
		{FailureRatio: 0.5, Window: -time.Second}, {FailureRatio: 0.5, Window: time.Millisecond},
	} {
		_, err := NewBreaker(s)
		assert.Error(t, err, "%+v", s)
	}
	_, err := NewBreaker(BreakerOptions{FailureRatio: 1})
	assert.NoError(t, err)
}

// A success is counted at the time its attempt was sent, which the
// Transport has read already: the healthy path reads no clock for the
// Breaker. A failure is counted when it ended: a timeout longer than the
// window still counts.
func TestBreakerCountsWhen(t *testing.T) {
	b, err := NewBreaker(BreakerOptions{FailureRatio: 0.7, Window: 10 * time.Second, MinCalls: 2})
	require.NoError(t, err)
	u, _ := url.Parse("http://api.test/x")
	hc := b.circuitFor(hostOf(u))
	req := newReq(t, "GET", "http://api.test/x", nil)
	sent := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ended := sent.Add(30 * time.Second) // a 30 s timeout: three windows long
	report := func(resp *http.Response, err error) (clockReads int) {
		tk, ok := hc.allow()
		require.True(t, ok)
		hc.report(&sentAttempt{ticket: tk, req: req, resp: resp, err: err, sent: sent.Sub(monoBase), at: sent, now: func() time.Time { clockReads++; return ended }})
		return clockReads
	}
	assert.Equal(t, 0, report(&http.Response{StatusCode: 200, Body: http.NoBody}, nil), "a success reads no clock")
	assert.Equal(t, 1, report(nil, errReset), "a failure is counted at its end")
	assert.Equal(t, 1, report(nil, errReset))
	// Counted at their ends, the two timeouts are alone in the window: 2
	// of 2 opens the circuit. Counted at their send, with the success, they
	// would be 2 of 3, under the ratio.
	assert.Equal(t, circuit.Open, hc.c.State(func() time.Time { return ended }))
}

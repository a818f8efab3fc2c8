package retryhttp

import (
	"context"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retryhttp/retryhttp/overload"
)

// slowBase answers 200 after took, counting what it was sent and the
// most it had in flight at once. It touches no socket.
type slowBase struct {
	took           time.Duration
	status         int
	sent           atomic.Int64
	mu             sync.Mutex
	inflight, peak int
	priorities     []string
}

func (b *slowBase) RoundTrip(req *http.Request) (*http.Response, error) {
	b.sent.Add(1)
	b.mu.Lock()
	b.inflight++
	b.peak = max(b.peak, b.inflight)
	b.priorities = append(b.priorities, req.Header.Get(overload.PriorityHeader))
	b.mu.Unlock()
	defer func() {
		b.mu.Lock()
		b.inflight--
		b.mu.Unlock()
	}()
	select {
	case <-time.After(b.took):
	case <-req.Context().Done():
		return nil, req.Context().Err()
	}
	code := b.status
	if code == 0 {
		code = http.StatusOK
	}
	return &http.Response{StatusCode: code, Header: http.Header{}, Body: http.NoBody, Request: req}, nil
}

func pinned(t *testing.T, n, queue int) *overload.Limiter {
	t.Helper()
	l, err := overload.NewLimiter(overload.Options{Min: n, Max: n, Queue: queue})
	require.NoError(t, err)
	return l
}

// goSend sends req through tr on a goroutine of wg's, expecting a
// response.
func goSend(t *testing.T, wg *sync.WaitGroup, tr *Transport, req *http.Request) {
	wg.Go(func() {
		resp, err := tr.RoundTrip(req)
		if assert.NoError(t, err) {
			resp.Body.Close()
		}
	})
}

// Over the host's limit with no queue, an attempt is refused at once,
// nothing sent: a give-up with ReasonLimited wrapping ErrLimited.
func TestLimitRefusesAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := &slowBase{took: time.Second}
		var reasons []Reason
		var mu sync.Mutex
		tr := &Transport{Base: base, Limit: pinned(t, 2, 0), Logger: slog.New(slog.DiscardHandler),
			Hooks: []Hook{retryHook(func(e Event) { mu.Lock(); reasons = append(reasons, e.GiveUp); mu.Unlock() })}}
		var wg sync.WaitGroup
		for range 2 {
			goSend(t, &wg, tr, newReq(t, "GET", "", nil))
		}
		synctest.Wait()
		start := time.Now()
		_, err := tr.RoundTrip(newReq(t, "GET", "", nil))
		var re *RetryError
		require.ErrorAs(t, err, &re)
		assert.Equal(t, ReasonLimited, re.Reason)
		assert.ErrorIs(t, err, overload.ErrLimited)
		assert.Equal(t, time.Duration(0), time.Since(start), "the refusal waited")
		assert.Equal(t, int64(2), base.sent.Load(), "the refused attempt was sent")
		// Another host has a limit of its own: sent while the first is full.
		other, err := http.NewRequest(http.MethodGet, "https://other.test/", nil)
		require.NoError(t, err)
		goSend(t, &wg, tr, other)
		synctest.Wait()
		assert.Equal(t, int64(3), base.sent.Load(), "another host's request was refused")
		wg.Wait()
		assert.Equal(t, []Reason{ReasonLimited}, reasons)
		resp, err := tr.RoundTrip(newReq(t, "GET", "", nil))
		require.NoError(t, err)
		resp.Body.Close()
	})
}

// With a queue, an attempt over the limit waits for a slot, and the host
// never has more than the limit in flight; a wait in the queue ends with
// the caller's deadline.
func TestLimitQueuesWithinTheDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := &slowBase{took: 100 * time.Millisecond}
		var giveUps []Reason
		tr := &Transport{Base: base, Limit: pinned(t, 2, 16), Logger: slog.New(slog.DiscardHandler),
			Hooks: []Hook{retryHook(func(e Event) { giveUps = append(giveUps, e.GiveUp) })}}
		var wg sync.WaitGroup
		for range 6 {
			goSend(t, &wg, tr, newReq(t, "GET", "", nil))
		}
		wg.Wait()
		assert.Equal(t, int64(6), base.sent.Load())
		assert.Equal(t, 2, base.peak, "the most in flight at once")

		for range 2 {
			goSend(t, &wg, tr, newReq(t, "GET", "", nil))
		}
		synctest.Wait()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
		defer cancel()
		start := time.Now()
		_, err := tr.RoundTrip(newReq(t, "GET", "", nil).WithContext(ctx))
		var re *RetryError
		require.ErrorAs(t, err, &re)
		assert.Equal(t, ReasonCanceled, re.Reason)
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Empty(t, giveUps, "the caller's own deadline in the queue was reported as a give-up")
		assert.Equal(t, 30*time.Millisecond, time.Since(start), "the wait ended at the deadline")
		wg.Wait()
		assert.Equal(t, int64(8), base.sent.Load(), "the request whose deadline passed in the queue was sent")
	})
}

// The limit learns from the attempts: a host whose latency climbs gets a
// lower limit; 503s, read as drops, bring it down too.
func TestLimitFollowsTheHost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &overload.Limiter{}
		base := &slowBase{took: 10 * time.Millisecond}
		tr := &Transport{Base: base, Limit: l, Policy: Policy{MaxAttempts: 1}, Logger: slog.New(slog.DiscardHandler)}
		burst := func() {
			var wg sync.WaitGroup
			limit, _ := l.For("http://api.test").Current()
			for range limit {
				wg.Go(func() {
					resp, err := tr.RoundTrip(newReq(t, "GET", "", nil))
					if err == nil {
						resp.Body.Close()
					}
				})
			}
			wg.Wait()
		}
		for range 20 {
			burst()
		}
		grown, _ := l.For("http://api.test").Current()
		assert.Greater(t, grown, overload.DefaultInitial, "a steady host used to its limit")
		base.status = http.StatusServiceUnavailable
		for range 3 {
			burst()
		}
		dropped, _ := l.For("http://api.test").Current()
		assert.Less(t, dropped, grown/2, "after three bursts of 503s")
	})
}

// A priority in the context is sent as the header on every attempt; the
// caller's request is left as it is, and a header the caller set wins.
func TestPriorityHeaderSent(t *testing.T) {
	base := script(status(503), status(200))
	tr := &Transport{Base: base, Policy: Policy{BaseDelay: time.Nanosecond}, Logger: slog.New(slog.DiscardHandler)}
	req := newReq(t, "GET", "", nil).WithContext(overload.WithPriority(context.Background(), overload.Critical))
	resp, err := tr.RoundTrip(req)
	require.NoError(t, err)
	resp.Body.Close()
	for _, s := range base.seen() {
		assert.Equal(t, "critical", s.header.Get(overload.PriorityHeader))
	}
	assert.Len(t, base.seen(), 2)
	assert.Empty(t, req.Header.Get(overload.PriorityHeader), "the caller's request was changed")

	own := script(status(200))
	tr.Base = own
	req = newReq(t, "GET", "", nil).WithContext(overload.WithPriority(context.Background(), overload.Critical))
	req.Header.Set(overload.PriorityHeader, "sheddable")
	resp, err = tr.RoundTrip(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, "sheddable", own.seen()[0].header.Get(overload.PriorityHeader))
}

// A hedge is sent only if the host's limit has room: with a limit of 1
// the slow first copy holds it and no hedge goes out; with 2 it does.
func TestLimitBoundsHedges(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for _, tc := range []struct {
			limit int
			sent  int64
		}{{1, 1}, {2, 2}} {
			base := &slowBase{took: 100 * time.Millisecond}
			tr := &Transport{Base: base, Limit: pinned(t, tc.limit, 0), Hedge: &Hedging{Delay: 10 * time.Millisecond},
				Logger: slog.New(slog.DiscardHandler)}
			resp, err := tr.RoundTrip(newReq(t, "GET", "", nil))
			require.NoError(t, err)
			resp.Body.Close()
			synctest.Wait()
			assert.Equal(t, tc.sent, base.sent.Load(), "attempts sent under a limit of %d", tc.limit)
			_, inflight := tr.Limit.For("http://api.test").Current()
			assert.Zero(t, inflight, "a slot was not given back")
		}
	})
}

// The Transport finds a host's Limit again through its cache, and asks the
// Limiter anew once the Limiter has forgotten it (MaxKeys): the calls it
// then sends count against the Limit the host's other callers share.
func TestTransportAsksAgainForAForgottenLimit(t *testing.T) {
	limiter, err := overload.NewLimiter(overload.Options{MaxKeys: 1})
	require.NoError(t, err)
	inside := make(chan struct{})
	release := make(chan struct{})
	base := roundTripFunc(func(req *http.Request) (*http.Response, error) {
		if req.Header.Get("X-Block") != "" {
			inside <- struct{}{}
			<-release
		}
		return &http.Response{StatusCode: http.StatusOK, Header: http.Header{}, Body: http.NoBody, Request: req}, nil
	})
	tr := &Transport{Base: base, Limit: limiter}
	get := func(url string, block bool) {
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		if block {
			req.Header.Set("X-Block", "1")
		}
		resp, err := tr.RoundTrip(req)
		if assert.NoError(t, err) {
			resp.Body.Close()
		}
	}
	get("http://a.test/", false)
	first := limiter.For("http://a.test")
	limiter.For("http://b.test") // room for b: a, idle, is forgotten
	require.True(t, first.Forgotten(), "the Limiter kept a past MaxKeys")

	done := make(chan struct{})
	go func() { defer close(done); get("http://a.test/", true) }()
	<-inside
	_, inflight := limiter.For("http://a.test").Current()
	_, stale := first.Current()
	close(release)
	<-done
	assert.Equal(t, 1, inflight, "the call in flight is not counted by the Limit the Limiter now has for a")
	assert.Equal(t, 0, stale, "the call in flight was counted by the forgotten Limit")
}

// A request's priority is its valid PriorityHeader's (any case), else its
// context's, else Default: the server is sent that one, a misspelled
// header giving way to the context's, and a refusal by the host's Limit
// is counted under it, as the overload Metrics show it.
func TestPriorityOfALimitRefusal(t *testing.T) {
	cases := []struct {
		header string // "" for none
		ctx    *overload.Priority
		sent   string // the header the server sees
		want   overload.Priority
	}{
		{"", nil, "", overload.Default},
		{"", ptr(overload.Critical), "critical", overload.Critical},
		{"", ptr(overload.Sheddable), "sheddable", overload.Sheddable},
		{"Critical", nil, "Critical", overload.Critical},
		{"sheddable", ptr(overload.Critical), "sheddable", overload.Sheddable},
		{"DEFAULT", ptr(overload.Critical), "DEFAULT", overload.Default},
		{"critcal", ptr(overload.Critical), "critical", overload.Critical},
		{"critcal", nil, "critcal", overload.Default},
		{"urgent", ptr(overload.Sheddable), "sheddable", overload.Sheddable},
	}
	for _, c := range cases {
		name := c.header + "/ctx="
		if c.ctx != nil {
			name += c.ctx.String()
		}
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				reg := prometheus.NewRegistry()
				m, err := overload.NewMetrics(reg)
				require.NoError(t, err)
				l, err := overload.NewLimiter(overload.Options{Min: 1, Max: 1, Name: "client", Hooks: []overload.Hook{m}})
				require.NoError(t, err)
				base := &slowBase{took: time.Second}
				tr := &Transport{Base: base, Limit: l, Logger: slog.New(slog.DiscardHandler)}
				mk := func() *http.Request {
					req := newReq(t, "GET", "", nil)
					if c.ctx != nil {
						req = req.WithContext(overload.WithPriority(req.Context(), *c.ctx))
					}
					if c.header != "" {
						req.Header.Set(overload.PriorityHeader, c.header)
					}
					return req
				}
				var wg sync.WaitGroup
				goSend(t, &wg, tr, mk()) // holds the one slot
				synctest.Wait()
				_, err = tr.RoundTrip(mk())
				require.ErrorIs(t, err, overload.ErrLimited)
				wg.Wait()
				assert.Equal(t, []string{c.sent}, base.priorities, "the header sent")
				for _, p := range []overload.Priority{overload.Default, overload.Critical, overload.Sheddable} {
					want := 0.0
					if p == c.want {
						want = 1
					}
					assert.Equal(t, want, refused(t, reg, p), "overload_refused_total{priority=%q}", p)
				}
			})
		})
	}
}

func ptr[T any](v T) *T { return &v }

// refused is overload_refused_total{priority=p} on reg, 0 without the
// series.
func refused(t *testing.T, reg *prometheus.Registry, p overload.Priority) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != "overload_refused_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "priority" && l.GetValue() == p.String() {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

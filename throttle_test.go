package retryhttp

import (
	"context"
	"log/slog"
	"math"
	"net/http"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/retryhttp/retryhttp/internal/defaults"
	"github.com/retryhttp/retryhttp/internal/throttle"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// overloaded answers 200 to one request in every `every` and 503 to the
// others, counting what reaches it.
type overloaded struct {
	every      int64
	sent, oks  atomic.Int64
	retryAfter string
}

func (o *overloaded) RoundTrip(r *http.Request) (*http.Response, error) {
	n := o.sent.Add(1)
	if n%o.every == 0 {
		o.oks.Add(1)
		return &http.Response{StatusCode: 200, Body: http.NoBody, Request: r}, nil
	}
	h := http.Header{}
	if o.retryAfter != "" {
		h.Set("Retry-After", o.retryAfter)
	}
	return &http.Response{StatusCode: 503, Header: h, Body: http.NoBody, Request: r}, nil
}

// capacity accepts at most perSecond requests in each second and answers
// 503 to the rest: a backend at sustained overload.
type capacity struct {
	perSecond int
	second    int64
	inSecond  int
	sent, oks atomic.Int64
}

func (c *capacity) RoundTrip(r *http.Request) (*http.Response, error) {
	c.sent.Add(1)
	if s := time.Now().Unix(); s != c.second {
		c.second, c.inSecond = s, 0
	}
	if c.inSecond < c.perSecond {
		c.inSecond++
		c.oks.Add(1)
		return &http.Response{StatusCode: 200, Body: http.NoBody, Request: r}, nil
	}
	return &http.Response{StatusCode: 503, Body: http.NoBody, Request: r}, nil
}

// At sustained overload (100 requests/s offered to a backend that takes
// 10/s), the client sends about K times what the backend accepts; the rest
// is rejected locally, with ErrThrottled and nothing sent.
func TestThrottleSettlesNearKTimesAccepts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		host := &capacity{perSecond: 10}
		th := &Throttle{} // the zero Throttle: K 2, two minutes
		tr := &Transport{Base: host, Throttle: th, Policy: Policy{MaxAttempts: 1}, Logger: slog.New(slog.DiscardHandler)}
		var throttled int
		for range 24000 { // 100 requests/s for four minutes: two windows
			resp, err := tr.RoundTrip(newReq(t, "GET", "", nil))
			if err != nil {
				require.ErrorIs(t, err, ErrThrottled)
				var re *RetryError
				require.ErrorAs(t, err, &re)
				assert.Equal(t, ReasonThrottled, re.Reason)
				assert.Equal(t, 0, re.Attempts)
				throttled++
			} else {
				resp.Body.Close()
			}
			time.Sleep(10 * time.Millisecond)
		}
		sent, oks := host.sent.Load(), host.oks.Load()
		ratio := float64(sent) / float64(oks)
		t.Logf("asked 24000, sent %d, accepted %d (%.2f per accept), throttled %d", sent, oks, ratio, throttled)
		assert.InDelta(t, 2.0, ratio, 0.3, "sent per accepted")
		assert.Equal(t, int64(24000), sent+int64(throttled))
		// 100 asked per accepted 10: (100 − 2·10) / 101.
		assert.InDelta(t, 0.8, th.RejectProbability("http://api.test"), 0.05, "the book's probability")
	})
}

// A healthy host is never throttled, and a host that recovers is sent
// everything again once its rejections leave the window.
func TestThrottleHealthyAndRecovering(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		th, err := NewThrottle(ThrottleOptions{K: 2, Window: 10 * time.Second})
		require.NoError(t, err)
		healthy := &overloaded{every: 1}
		tr := &Transport{Base: healthy, Throttle: th, Policy: Policy{MaxAttempts: 1}}
		for range 1000 {
			resp, err := tr.RoundTrip(newReq(t, "GET", "", nil))
			require.NoError(t, err)
			resp.Body.Close()
		}
		assert.Equal(t, 0.0, th.RejectProbability("http://api.test"))
		time.Sleep(11 * time.Second) // the successes leave the window

		down := &overloaded{every: math.MaxInt64}
		tr.Base = down
		for range 1000 {
			if resp, err := tr.RoundTrip(newReq(t, "GET", "", nil)); err == nil {
				resp.Body.Close()
			}
			time.Sleep(5 * time.Millisecond)
		}
		assert.Greater(t, th.RejectProbability("http://api.test"), 0.5)
		assert.Less(t, down.sent.Load(), int64(1000), "a host rejecting everything is shed from")

		time.Sleep(11 * time.Second) // the window passes
		assert.Equal(t, 0.0, th.RejectProbability("http://api.test"))
	})
}

// What counts as accepted: 2xx, 3xx and 4xx without a wait; not 5xx, 429,
// a 4xx with Retry-After, or a network error. A caller's cancellation is
// not counted at all.
func TestThrottleWhatCounts(t *testing.T) {
	tr := &Transport{}
	judge := rules{statuses: tr.RetryStatuses, shouldRetry: tr.ShouldRetry, hints: tr.RetryHints}
	now := time.Now()
	for code, want := range map[int]bool{200: true, 304: true, 404: true, 409: true, 429: false, 500: false, 503: false} {
		assert.Equal(t, want, judge.accepted(&http.Response{StatusCode: code, Header: http.Header{}}, now), "%d", code)
	}
	limited := &http.Response{StatusCode: 403, Header: http.Header{"Retry-After": {"5"}}}
	assert.False(t, judge.accepted(limited, now), "a 403 asking to wait is throttling")

	h := &hostThrottle{name: "x", h: throttle.New(time.Minute, 1)}
	req := newReq(t, "GET", "", nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	h.report(&judge, &sentAttempt{req: req.WithContext(ctx), err: context.Canceled, sent: now.Sub(monoBase), at: now, now: func() time.Time { return now }})
	assert.False(t, h.h.Rejecting(), "a cancellation is not counted")
	assert.Equal(t, 0.0, h.h.Probability(1, now))
	h.report(&judge, &sentAttempt{req: req, err: errReset, sent: now.Sub(monoBase), at: now, now: func() time.Time { return now }})
	assert.True(t, h.h.Rejecting(), "a network error is a rejection")
	assert.InDelta(t, 0.5, h.h.Probability(1, now), 1e-9, "(1 − 0) / (1 + 1)")
}

func TestThrottleSettingsValidated(t *testing.T) {
	for _, s := range []ThrottleOptions{{K: 0.5}, {K: -1}, {K: math.NaN()}, {K: math.Inf(1)}, {Window: -1}, {Window: time.Millisecond}, {MaxHosts: -1}, {MinRequests: -1}} {
		_, err := NewThrottle(s)
		assert.Error(t, err, "%+v", s)
	}
}

// Past MaxHosts, a host that rejected nothing is forgotten first, so a
// rejecting host keeps its counts.
func TestThrottleBoundedHosts(t *testing.T) {
	th, err := NewThrottle(ThrottleOptions{MaxHosts: 3})
	require.NoError(t, err)
	tr := &Transport{Base: &overloaded{every: math.MaxInt64}, Throttle: th, Policy: Policy{MaxAttempts: 1}, Logger: slog.New(slog.DiscardHandler)}
	for range 20 {
		if resp, err := tr.RoundTrip(getReq(t, "http://bad.test/")); err == nil {
			resp.Body.Close()
		}
	}
	tr.Base = &overloaded{every: 1}
	for i := range 50 {
		resp, err := tr.RoundTrip(getReq(t, "http://h"+string(rune('a'+i%26))+".test/"))
		require.NoError(t, err)
		resp.Body.Close()
	}
	assert.Greater(t, th.RejectProbability("http://bad.test"), 0.5)
	n := 0
	th.hosts.Range(func(any, any) bool { n++; return true })
	assert.LessOrEqual(t, n, 3)
}

func getReq(t *testing.T, url string) *http.Request {
	req, err := http.NewRequest("GET", url, nil)
	require.NoError(t, err)
	return req
}

// A client's first failure does not throttle its retry: nothing is
// rejected until the window holds MinRequests attempts.
func TestThrottleSparesTheFirstRetries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		down := &overloaded{every: math.MaxInt64}
		tr := &Transport{Base: down, Throttle: &Throttle{}, Policy: Policy{MaxAttempts: 4, BaseDelay: time.Millisecond}, Budget: NoBudget,
			Logger: slog.New(slog.DiscardHandler)}
		for range 5 { // 20 attempts, every one sent
			resp, err := tr.RoundTrip(newReq(t, "GET", "", nil))
			require.NoError(t, err)
			resp.Body.Close()
		}
		assert.Equal(t, int64(defaults.ThrottleMinRequests), down.sent.Load())
		assert.Greater(t, tr.Throttle.RejectProbability("http://api.test"), 0.9, "and past them, the formula")
	})
}

// A retry the Throttle rejects ends the call with the response the
// attempt before it got, as a breaker's refusal does: the caller sees the
// 503, not an error for a request that did reach the server.
func TestThrottledRetryReturnsTheLastResponse(t *testing.T) {
	const n = 10000
	th, err := NewThrottle(ThrottleOptions{MinRequests: n})
	require.NoError(t, err)
	down := &overloaded{every: math.MaxInt64}
	once := &Transport{Base: down, Throttle: th, Policy: Policy{MaxAttempts: 1}, Logger: slog.New(slog.DiscardHandler)}
	for range n - 1 { // the window fills with rejections, below MinRequests: all sent
		resp, err := once.RoundTrip(newReq(t, "GET", "", nil))
		require.NoError(t, err)
		resp.Body.Close()
	}
	var giveUp Reason
	retrying := &Transport{Base: down, Throttle: th, Policy: Policy{MaxAttempts: 2, BaseDelay: time.Nanosecond}, Budget: NoBudget,
		Logger: slog.New(slog.DiscardHandler), Hooks: []Hook{retryHook(func(e Event) { giveUp = e.GiveUp })}}
	// The first attempt is the n-th request (p 0); its 503 makes the retry's
	// probability n/(n+1).
	resp, err := retrying.RoundTrip(newReq(t, "GET", "", nil))
	require.NoError(t, err, "a throttled retry returns the response it holds")
	assert.Equal(t, 503, resp.StatusCode)
	resp.Body.Close()
	assert.Equal(t, ReasonThrottled, giveUp)
	assert.Equal(t, int64(n), down.sent.Load(), "the retry was not sent")
}

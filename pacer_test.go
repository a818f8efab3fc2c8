package retryhttp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/retryhttp/retryhttp/overload"
)

// quotaServer enforces a quota of n requests a window, the windows
// aligned to multiples of window, and says so in the headers of dialect.
type quotaServer struct {
	n       int
	window  time.Duration
	dialect string // "github", "ietf", "openai", "draft": the headers it sends

	mu       sync.Mutex
	start    time.Time
	current  int64 // the window's number
	used     int
	served   atomic.Int64
	rejected atomic.Int64
}

func (s *quotaServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	now := time.Now()
	s.mu.Lock()
	win := int64(now.Sub(s.start) / s.window)
	if win != s.current {
		s.current, s.used = win, 0
	}
	ok := s.used < s.n
	if ok {
		s.used++
	}
	left := s.n - s.used
	reset := s.start.Add(time.Duration(win+1) * s.window)
	s.mu.Unlock()
	h := w.Header()
	untilReset := reset.Sub(now)
	switch s.dialect {
	case "github":
		h.Set("X-RateLimit-Limit", strconv.Itoa(s.n))
		h.Set("X-RateLimit-Remaining", strconv.Itoa(left))
		h.Set("X-RateLimit-Reset", strconv.FormatInt(reset.Unix(), 10))
	case "ietf": // draft-11: t in whole seconds, rounded up
		h.Set("RateLimit-Policy", fmt.Sprintf(`"default";q=%d;w=%d`, s.n, int(s.window.Seconds())))
		h.Set("RateLimit", fmt.Sprintf(`"default";r=%d;t=%d`, left, int(math.Ceil(untilReset.Seconds()))))
	case "draft":
		h.Set("RateLimit-Remaining", strconv.Itoa(left))
		h.Set("RateLimit-Reset", strconv.Itoa(int(math.Ceil(untilReset.Seconds()))))
	case "openai":
		h.Set("X-Ratelimit-Remaining-Requests", strconv.Itoa(left))
		h.Set("X-Ratelimit-Reset-Requests", untilReset.Round(time.Millisecond).String())
	}
	if !ok {
		s.rejected.Add(1)
		w.WriteHeader(http.StatusTooManyRequests)
		return
	}
	s.served.Add(1)
	time.Sleep(2 * time.Millisecond)
}

// isPaced reports whether err is a Pacer's refusal: a *RetryError with
// ReasonPaced that wraps errPaced.
func isPaced(err error) bool {
	var re *RetryError
	return errors.As(err, &re) && re.Reason == ReasonPaced && errors.Is(err, errPaced)
}

// handlerBase sends a request to a handler in the same process.
type handlerBase struct{ h http.Handler }

func (b handlerBase) RoundTrip(r *http.Request) (*http.Response, error) {
	rec := httptest.NewRecorder()
	b.h.ServeHTTP(rec, r)
	resp := rec.Result()
	resp.Request = r
	return resp, nil
}

// offer runs 8 clients offering factor times the quota, evenly, for
// windows windows, each sending once (no retries), in virtual time.
func offer(t *testing.T, s *quotaServer, pacer *Pacer, factor, windows int) (served, rejected, paced int64) {
	return offerFleet(t, s, []*Pacer{pacer}, factor, windows)
}

// offerFleet is offer with the clients spread over processes, one a
// Pacer: client c is process c%len(pacers)'s.
func offerFleet(t *testing.T, s *quotaServer, pacers []*Pacer, factor, windows int) (served, rejected, paced int64) {
	synctest.Test(t, func(t *testing.T) {
		s.start = time.Now().Truncate(time.Second)
		end := s.start.Add(time.Duration(windows) * s.window)
		every := s.window / time.Duration(s.n*factor/8) // each client's interval
		var wg sync.WaitGroup
		var pacedN atomic.Int64
		for c := range 8 {
			tr := &Transport{Base: handlerBase{s}, Pacer: pacers[c%len(pacers)], Policy: Policy{MaxAttempts: 1}, Logger: slog.New(slog.DiscardHandler)}
			client := &http.Client{Transport: tr}
			wg.Go(func() {
				time.Sleep(every * time.Duration(c) / 8)
				for next := time.Now(); next.Before(end); next = next.Add(every) {
					if d := time.Until(next); d > 0 {
						time.Sleep(d)
					}
					ctx, cancel := context.WithDeadline(context.Background(), end)
					req, _ := http.NewRequestWithContext(ctx, "GET", "http://api.test/items", nil)
					resp, err := client.Do(req)
					cancel()
					switch {
					case isPaced(err):
						pacedN.Add(1)
					case err == nil:
						resp.Body.Close()
					}
				}
			})
		}
		wg.Wait()
		paced = pacedN.Load()
	})
	return s.served.Load(), s.rejected.Load(), paced
}

// 8 clients offering three times a quota for several windows: paced,
// 429s are at most 1% of the requests sent and the served at least 95%
// of the quota; the quota's size and window, and the dialect, vary.
func TestPacerKeepsWithinQuota(t *testing.T) {
	for _, dialect := range []string{"github", "ietf", "draft", "openai"} {
		for _, q := range []struct {
			n      int
			window time.Duration
		}{{60, time.Second}, {100, 10 * time.Second}, {600, time.Minute}, {1000, time.Hour}} {
			windows := 4
			if q.window == time.Hour {
				windows = 2
			}
			name := fmt.Sprintf("%s/%d per %v", dialect, q.n, q.window)
			t.Run(name, func(t *testing.T) {
				var uServed, uRejected int64 = -1, -1 // unpaced, measured on one quota, for the figure
				if q.n == 100 {
					unpaced := &quotaServer{n: q.n, window: q.window, dialect: dialect}
					uServed, uRejected, _ = offer(t, unpaced, nil, 3, windows)
				}
				s := &quotaServer{n: q.n, window: q.window, dialect: dialect}
				pacer := &Pacer{MaxWait: q.window + time.Second}
				served, rejected, paced := offer(t, s, pacer, 3, windows)
				quota := int64(q.n * windows)
				if uServed >= 0 {
					t.Logf("%s: without pacing %d served, %d 429s", name, uServed, uRejected)
				}
				t.Logf("%s: paced %d served (%.0f%% of the quota), %d 429s (%.2f%% of those sent), %d refused unsent",
					name, served, 100*float64(served)/float64(quota), rejected, 100*float64(rejected)/float64(served+rejected), paced)
				if rejected*100 > served+rejected {
					t.Errorf("%d 429s of %d sent: more than 1%%", rejected, served+rejected)
				}
				if served*100 < quota*95 {
					t.Errorf("%d served of a quota of %d: under 95%%", served, quota)
				}
			})
		}
	}
}

// A request that would wait for the quota past MaxWait, or past its
// deadline, ends at once with ReasonPaced, nothing sent; a
// critical one is not spread but waits like the rest for a spent quota.
func TestPacerRefusesPastMaxWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var sent atomic.Int64
		reset := time.Now().Add(10 * time.Second)
		base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			sent.Add(1)
			h := http.Header{}
			h.Set("X-RateLimit-Remaining", "0")
			h.Set("X-RateLimit-Reset", strconv.FormatInt(reset.Unix(), 10))
			return &http.Response{StatusCode: 200, Header: h, Body: http.NoBody, Request: r}, nil
		})
		pacer := &Pacer{MaxWait: 5 * time.Second}
		tr := &Transport{Base: base, Pacer: pacer, Logger: slog.New(slog.DiscardHandler)}
		get := func(ctx context.Context) error {
			req, _ := http.NewRequestWithContext(ctx, "GET", "http://api.test/", nil)
			resp, err := tr.RoundTrip(req)
			if err == nil {
				resp.Body.Close()
			}
			return err
		}
		learn(t, pacer, "http://api.test/", get)
		sent.Store(1)
		start := time.Now()
		err := get(context.Background())
		var re *RetryError
		if !isPaced(err) || !errors.As(err, &re) || re.Reason != ReasonPaced || sent.Load() != 1 || time.Since(start) != 0 {
			t.Fatalf("a request past MaxWait: %v after %v, %d sent; want ReasonPaced at once, nothing sent", err, time.Since(start), sent.Load())
		}
		pacer.MaxWait = time.Minute
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		if err := get(ctx); !isPaced(err) || sent.Load() != 1 {
			t.Fatalf("a request whose deadline is before the reset: %v, %d sent; want ReasonPaced, nothing sent", err, sent.Load())
		}
		crit := overload.WithPriority(context.Background(), overload.Critical)
		if err := get(crit); err != nil || time.Since(start) < 10*time.Second-time.Second || sent.Load() != 2 {
			t.Fatalf("a critical request with the quota spent: %v after %v; want it held until the reset, then sent", err, time.Since(start))
		}
	})
}

// A critical request is not spread: with the quota's requests left and
// others spread out, it goes at once.
func TestPacerCriticalGoesFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reset := time.Now().Add(10 * time.Second)
		base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			h := http.Header{}
			h.Set("X-RateLimit-Remaining", "10")
			h.Set("X-RateLimit-Reset", strconv.FormatInt(reset.Unix(), 10))
			return &http.Response{StatusCode: 200, Header: h, Body: http.NoBody, Request: r}, nil
		})
		pacer := &Pacer{}
		tr := &Transport{Base: base, Pacer: pacer}
		get := func(ctx context.Context) time.Duration {
			start := time.Now()
			req, _ := http.NewRequestWithContext(ctx, "GET", "http://api.test/", nil)
			resp, err := tr.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			return time.Since(start)
		}
		learn(t, pacer, "http://api.test/", func(ctx context.Context) error { get(ctx); return nil }) // 10 left for 10 s
		get(context.Background())
		if d := get(context.Background()); d < 500*time.Millisecond {
			t.Fatalf("a default request after another: sent after %v, want it spread (about 1 s)", d)
		}
		if d := get(overload.WithPriority(context.Background(), overload.Critical)); d != 0 {
			t.Fatalf("a critical request: sent after %v, want at once", d)
		}
	})
}

// learn sends requests with get until the Pacer has read the host's
// quota: it looks for the headers in one response at a time.
func learn(t *testing.T, p *Pacer, host string, get func(context.Context) error) {
	t.Helper()
	u, _ := url.Parse(host)
	for range 100 {
		h := p.host(u)
		h.mu.Lock()
		known := h.w.Known()
		h.mu.Unlock()
		if known {
			return
		}
		if err := get(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	t.Fatal("the Pacer did not read the quota in 100 responses")
}

// The headers' values across their range, and past it: every dialect is
// read, and what is out of range is ignored or capped, flagged.
func TestReadQuota(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	for _, tc := range []struct {
		headers   map[string]string
		ok, bad   bool
		remaining int64
		reset     time.Duration
	}{
		{map[string]string{}, false, false, 0, 0},
		{map[string]string{"X-RateLimit-Remaining": "42", "X-RateLimit-Reset": "1800000030"}, true, false, 42, 30 * time.Second},
		{map[string]string{"X-RateLimit-Remaining": "42", "X-RateLimit-Reset": "30"}, true, false, 42, 30 * time.Second},
		{map[string]string{"X-RateLimit-Remaining": "42"}, false, false, 0, 0}, // no reset: nothing to pace on
		{map[string]string{"X-RateLimit-Remaining": "-1", "X-RateLimit-Reset": "30"}, true, true, 0, 0},
		{map[string]string{"X-RateLimit-Remaining": "x", "X-RateLimit-Reset": "30"}, true, true, 0, 0},
		{map[string]string{"X-RateLimit-Remaining": "5", "X-RateLimit-Reset": "-30"}, true, true, 0, 0},
		{map[string]string{"X-RateLimit-Remaining": "5", "X-RateLimit-Reset": "999999999"}, true, true, 5, maxWindow}, // 31 years of seconds: capped
		{map[string]string{"X-RateLimit-Remaining": "5", "X-RateLimit-Reset": "1e300"}, true, true, 5, maxWindow},
		{map[string]string{"X-RateLimit-Remaining": "5", "X-RateLimit-Reset": "1799999990"}, true, false, 5, 0}, // passed: no window
		{map[string]string{"RateLimit": `"default";r=50;t=30`}, true, false, 50, 30 * time.Second},
		{map[string]string{"RateLimit": `"burst";r=5;t=1, "day";r=100;t=86400`}, true, false, 100, 86400 * time.Second},
		{map[string]string{"RateLimit": `"a";r=10;t=10, "b";r=0;t=5`}, true, false, 0, 5 * time.Second},
		{map[string]string{"RateLimit": `"a";r=-3;t=10`}, false, false, 0, 0},
		{map[string]string{"RateLimit": `"a";r=3;t=1e12`}, true, true, 3, maxWindow},
		{map[string]string{"RateLimit-Remaining": "7", "RateLimit-Reset": "12"}, true, false, 7, 12 * time.Second},
		{map[string]string{"X-Ratelimit-Remaining-Requests": "59", "X-Ratelimit-Reset-Requests": "1s"}, true, false, 59, time.Second},
		{map[string]string{"X-Ratelimit-Remaining-Requests": "59", "X-Ratelimit-Reset-Requests": "6m0s"}, true, false, 59, 6 * time.Minute},
		{map[string]string{"X-Ratelimit-Remaining-Requests": "59", "X-Ratelimit-Reset-Requests": "soon"}, true, true, 0, 0},
		// OpenAI's token quota binds only when spent: then until its reset.
		{map[string]string{"X-Ratelimit-Remaining-Requests": "59", "X-Ratelimit-Reset-Requests": "1s", "X-Ratelimit-Remaining-Tokens": "1200", "X-Ratelimit-Reset-Tokens": "6s"}, true, false, 59, time.Second},
		{map[string]string{"X-Ratelimit-Remaining-Requests": "59", "X-Ratelimit-Reset-Requests": "1s", "X-Ratelimit-Remaining-Tokens": "0", "X-Ratelimit-Reset-Tokens": "6s"}, true, false, 0, 6 * time.Second},
		{map[string]string{"X-Ratelimit-Remaining-Requests": "0", "X-Ratelimit-Reset-Requests": "8s", "X-Ratelimit-Remaining-Tokens": "0", "X-Ratelimit-Reset-Tokens": "6s"}, true, false, 0, 8 * time.Second},
		{map[string]string{"X-Ratelimit-Remaining-Tokens": "0", "X-Ratelimit-Reset-Tokens": "250ms"}, true, false, 0, 250 * time.Millisecond},
		{map[string]string{"X-Ratelimit-Remaining-Tokens": "0", "X-Ratelimit-Reset-Tokens": "-1s"}, false, false, 0, 0},
		{map[string]string{"X-Ratelimit-Remaining-Tokens": "0", "X-Ratelimit-Reset-Tokens": "48h"}, true, true, 0, maxWindow},
		{map[string]string{"X-Ratelimit-Remaining-Requests": "x", "X-Ratelimit-Reset-Requests": "1s", "X-Ratelimit-Remaining-Tokens": "0", "X-Ratelimit-Reset-Tokens": "2s"}, true, false, 0, 2 * time.Second},
	} {
		h := http.Header{}
		for k, v := range tc.headers {
			h.Set(k, v)
		}
		q, _, ok := readQuota(h, func() time.Time { return now })
		if ok != tc.ok || q.bad != tc.bad || (ok && !tc.bad && (q.remaining != tc.remaining || q.reset != tc.reset)) ||
			(ok && tc.bad && tc.reset != 0 && (q.remaining != tc.remaining || q.reset != tc.reset)) {
			t.Errorf("%v: %+v ok %v; want remaining %d reset %v, ok %v, bad %v", tc.headers, q, ok, tc.remaining, tc.reset, tc.ok, tc.bad)
		}
	}
}

var fuzzURL, _ = url.Parse("http://fuzz.test/")

// Whatever the header values, reading them never panics, never yields a
// negative or an uncapped reset, and a Pacer fed them never holds a
// request past MaxWait.
func FuzzReadQuota(f *testing.F) {
	for _, s := range []string{`"default";r=50;t=30`, `"a";r=0;t=1e308`, "1800000030", "-5", "NaN", "6m0s", "1e19", ";;;,,=", `"a";r=1;t=1,"b";r=0;t=-1`} {
		f.Add(s, "42")
	}
	f.Fuzz(func(t *testing.T, reset, remaining string) {
		for _, names := range [][2]string{{"X-RateLimit-Reset", "X-RateLimit-Remaining"}, {"RateLimit-Reset", "RateLimit-Remaining"},
			{"X-Ratelimit-Reset-Requests", "X-Ratelimit-Remaining-Requests"}, {"X-Ratelimit-Reset-Tokens", "X-Ratelimit-Remaining-Tokens"}, {"RateLimit", ""}} {
			h := http.Header{}
			h.Set(names[0], reset)
			if names[1] != "" {
				h.Set(names[1], remaining)
			}
			q, _, ok := readQuota(h, time.Now)
			if ok && (q.reset < 0 || q.reset > maxWindow || q.remaining < 0) {
				t.Fatalf("%v: %+v", h, q)
			}
			var logged bytes.Buffer
			p := &Pacer{MaxWait: time.Second, Logger: slog.New(slog.NewTextHandler(&logged, nil))}
			hp := p.host(fuzzURL)
			hp.seen.Store(true)
			hp.report(&http.Response{Header: h, Request: &http.Request{URL: fuzzURL}}, 0)
			ctx, cancel := context.WithCancel(context.Background())
			cancel() // a wait would end at once: only its length is checked
			start := time.Now()
			var seq int64
			r, _ := hp.allow(ctx, true, &seq)
			if r != ReasonNone && r != ReasonPaced && r != ReasonCanceled {
				t.Fatalf("%v: reason %v", h, r)
			}
			if time.Since(start) > 100*time.Millisecond {
				t.Fatalf("%v: allow took %v", h, time.Since(start))
			}
			if q.bad && !strings.Contains(logged.String(), "out of range") {
				t.Fatalf("%v: a value out of range was not logged", h)
			}
		}
	})
}

// Live on loopback, in real time: 8 clients offering three times a quota
// of 60 a second, GitHub's headers and the IETF ones (those also with
// windows that start off a second's boundary), for 3 windows.
// Paced, at most 1% of the requests sent are answered 429 and at least
// 95% of the quota is served (unpaced, two in three are 429s:
// TestPacerKeepsWithinQuota).
func TestPacerLiveOnLoopback(t *testing.T) {
	t.Parallel() // it waits more than it works
	for _, tc := range []struct {
		dialect string
		phase   time.Duration // where in a second the windows start
	}{{"github", 0}, {"ietf", 0}, {"ietf", 400 * time.Millisecond}} {
		t.Run(fmt.Sprintf("%s/%v", tc.dialect, tc.phase), func(t *testing.T) {
			t.Parallel()
			paceLive(t, tc.dialect, tc.phase)
		})
	}
}

func paceLive(t *testing.T, dialect string, phase time.Duration) {
	s := &quotaServer{n: 60, window: time.Second, dialect: dialect}
	s.start = time.Now().Truncate(time.Second).Add(phase)
	srv := httptest.NewServer(s)
	defer srv.Close()
	pacer := &Pacer{MaxWait: 2 * time.Second}
	client := &http.Client{Transport: &Transport{Pacer: pacer, Policy: Policy{MaxAttempts: 1}, Logger: slog.New(slog.DiscardHandler)}}
	// Start with a window: the quota's count starts with it.
	time.Sleep(time.Until(s.start.Add(time.Second)))
	start := time.Now()
	end := start.Add(3 * time.Second)
	every := time.Second / time.Duration(s.n*3/8)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for next := time.Now(); next.Before(end); next = next.Add(every) {
				time.Sleep(time.Until(next))
				ctx, cancel := context.WithDeadline(context.Background(), end)
				req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/items", nil)
				if resp, err := client.Do(req); err == nil {
					resp.Body.Close()
				}
				cancel()
			}
		})
	}
	wg.Wait()
	served, rejected := s.served.Load(), s.rejected.Load()
	quota := int64(s.n * 3)
	t.Logf("live, %s: %d served (%.0f%% of the quota of %d), %d 429s (%.2f%% of those sent)", dialect, served, 100*float64(served)/float64(quota), quota, rejected, 100*float64(rejected)/float64(max(1, served+rejected)))
	if rejected*100 > served+rejected {
		t.Errorf("%d 429s of %d sent: more than 1%%", rejected, served+rejected)
	}
	if served*100 < quota*95 {
		t.Errorf("%d served of a quota of %d: under 95%%", served, quota)
	}
}

// A Pacer that meets many hosts keeps a bounded number, the ones that
// sent rate-limit headers first.
func TestPacerForgetsHosts(t *testing.T) {
	p := &Pacer{}
	paced, _ := url.Parse("http://paced.test/")
	p.host(paced).seen.Store(true)
	for i := range 3 * maxPacedHosts {
		u, _ := url.Parse(fmt.Sprintf("http://h%d.test/", i))
		p.host(u)
	}
	if n := len(p.hosts); n > maxPacedHosts {
		t.Fatalf("%d hosts kept, want at most %d", n, maxPacedHosts)
	}
	if _, ok := p.hosts["http://paced.test"]; !ok {
		t.Fatal("the host that sent rate-limit headers was forgotten before those that sent none")
	}
}

// OpenAI's token quota, once spent, holds every request until its reset
// though requests are left; one whose wait would pass MaxWait ends at
// once, nothing sent. Tokens left hold nothing.
func TestPacerSpentTokensHold(t *testing.T) {
	for _, tc := range []struct {
		tokens  string
		maxWait time.Duration
		waited  time.Duration // the second request's wait; -1: refused
	}{{"0", time.Minute, 3 * time.Second}, {"0", time.Second, -1}, {"5000", time.Minute, 0}} {
		t.Run(fmt.Sprintf("tokens %s, MaxWait %v", tc.tokens, tc.maxWait), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var sent atomic.Int64
				h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					sent.Add(1)
					w.Header().Set("X-Ratelimit-Remaining-Requests", "100")
					w.Header().Set("X-Ratelimit-Reset-Requests", "1m0s")
					w.Header().Set("X-Ratelimit-Remaining-Tokens", tc.tokens)
					w.Header().Set("X-Ratelimit-Reset-Tokens", "3s")
				})
				p := &Pacer{MaxWait: tc.maxWait}
				u, _ := url.Parse("http://api.openai.test/")
				p.host(u).seen.Store(true) // read from the first response, not found within a few
				client := &http.Client{Transport: &Transport{Base: handlerBase{h}, Pacer: p, Logger: slog.New(slog.DiscardHandler)}}
				for i := range 2 {
					start := time.Now()
					resp, err := client.Get("http://api.openai.test/v1/chat")
					waited := time.Since(start)
					if i == 0 {
						if err != nil {
							t.Fatal(err)
						}
						resp.Body.Close()
						continue
					}
					switch {
					case tc.waited < 0:
						if !isPaced(err) || sent.Load() != 1 || waited != 0 {
							t.Fatalf("err %v after %v, %d sent: want ReasonPaced at once, nothing sent", err, waited, sent.Load())
						}
					case err != nil:
						t.Fatal(err)
					default:
						resp.Body.Close()
						if waited != tc.waited {
							t.Fatalf("the second request waited %v, want %v", waited, tc.waited)
						}
					}
				}
			})
		})
	}
}

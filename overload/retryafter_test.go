package overload_test

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/retryhttp/retryhttp/overload"
)

// fixedRetryAfter tells every shed request to come back in one second, as
// servers commonly do: the baseline the measured Retry-After is held to.
type fixedRetryAfter struct{ http.ResponseWriter }

func (w fixedRetryAfter) WriteHeader(code int) {
	if code == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "1")
	}
	w.ResponseWriter.WriteHeader(code)
}

// overloadRun is what clients saw of a burst of overload.
type overloadRun struct {
	retries, reshed  int64 // attempts after the first, and those shed again
	critical, served int64 // critical requests, and those served in the end
	criticalFirst    int64 // critical requests served at their first attempt
	lastServed       time.Duration
	lastShed         time.Duration // the server was back to normal from then on
}

// handlerCapacity is a handler's capacity: its limit, pinned, and how long it takes.
type handlerCapacity struct {
	limit   int
	latency time.Duration
}

func (c handlerCapacity) perSecond() int { return c.limit * int(time.Second/c.latency) }

// runOverload offers a Shedder whose handler serves c.perSecond()
// requests a second `factor` times that for `burst`, in virtual time:
// one request in six critical, two default, three sheddable, evenly
// spaced. Each client retries a 503 after its Retry-After, up to 8
// attempts.
func runOverload(t *testing.T, c handlerCapacity, fixed bool, factor int, burst time.Duration) overloadRun {
	var run overloadRun
	synctest.Test(t, func(t *testing.T) {
		s, err := overload.NewShedder(overload.ShedOptions{Limit: overload.Options{Min: c.limit, Max: c.limit, Queue: 16, MaxWait: 50 * time.Millisecond}})
		if err != nil {
			t.Fatal(err)
		}
		h := s.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { time.Sleep(c.latency) }))
		start := time.Now()
		var retries, reshed, critical, served, criticalFirst atomic.Int64
		var last, lastShed atomic.Int64
		client := func(p overload.Priority) {
			if p == overload.Critical {
				critical.Add(1)
			}
			for attempt := 1; attempt <= 8; attempt++ {
				r := httptest.NewRequest(http.MethodPost, "/", nil)
				r.Header.Set(overload.PriorityHeader, p.String())
				rec := httptest.NewRecorder()
				var w http.ResponseWriter = rec
				if fixed {
					w = fixedRetryAfter{rec}
				}
				h.ServeHTTP(w, r)
				if attempt > 1 {
					retries.Add(1)
				}
				if rec.Code == http.StatusOK {
					served.Add(1)
					if p == overload.Critical && attempt == 1 {
						criticalFirst.Add(1)
					}
					last.Store(int64(time.Since(start)))
					return
				}
				if attempt > 1 {
					reshed.Add(1)
				}
				lastShed.Store(int64(time.Since(start)))
				secs, err := strconv.Atoi(rec.Header().Get("Retry-After"))
				if err != nil || secs < 1 || secs > 60 {
					t.Errorf("Retry-After %q, want 1 to 60 seconds", rec.Header().Get("Retry-After"))
					return
				}
				time.Sleep(time.Duration(secs) * time.Second)
			}
		}
		// Warm the limit's latency at a load it serves.
		for range 20 {
			client(overload.Default)
		}
		served.Store(0)
		start = time.Now()
		var wg sync.WaitGroup
		every := time.Second / time.Duration(c.perSecond()*factor)
		for n := 0; time.Since(start) < burst; n++ {
			p := overload.Sheddable
			switch n % 6 {
			case 0:
				p = overload.Critical
			case 1, 2:
				p = overload.Default
			}
			wg.Go(func() { client(p) })
			time.Sleep(every)
		}
		wg.Wait()
		run = overloadRun{retries.Load(), reshed.Load(), critical.Load(), served.Load(), criticalFirst.Load(), time.Duration(last.Load()), time.Duration(lastShed.Load())}
	})
	return run
}

// At three times what a handler serves, for bursts of 1 and 2 s, on
// handlers of several capacities, the retries a measured Retry-After
// spreads over the backlog are shed again at most half as often as with
// a fixed second, critical requests are served at once as often, and as
// many requests are served in the end. (The measured waits are longer:
// the last of them is served later; see the log.)
func TestMeasuredRetryAfterSpreadsRetries(t *testing.T) {
	for _, c := range []handlerCapacity{{4, 10 * time.Millisecond}, {8, 40 * time.Millisecond}, {12, 20 * time.Millisecond}} {
		for _, burst := range []time.Duration{time.Second, 2 * time.Second} {
			fixed := runOverload(t, c, true, 3, burst)
			measured := runOverload(t, c, false, 3, burst)
			fr := float64(fixed.reshed) / float64(max(1, fixed.retries))
			mr := float64(measured.reshed) / float64(max(1, measured.retries))
			t.Logf("%d/s, burst %v: fixed 1 s: %d retries, %.0f%% shed again, critical %d/%d at once, last shed at %v, last served at %v; measured: %d retries, %.0f%% shed again, critical %d/%d at once, last shed at %v, last served at %v",
				c.perSecond(), burst, fixed.retries, 100*fr, fixed.criticalFirst, fixed.critical, fixed.lastShed.Round(time.Millisecond), fixed.lastServed.Round(time.Millisecond),
				measured.retries, 100*mr, measured.criticalFirst, measured.critical, measured.lastShed.Round(time.Millisecond), measured.lastServed.Round(time.Millisecond))
			if mr > fr/2 {
				t.Errorf("%d/s, burst %v: %.0f%% of retries shed again with the measured Retry-After, %.0f%% with a fixed second: want at most half", c.perSecond(), burst, 100*mr, 100*fr)
			}
			if measured.criticalFirst < fixed.criticalFirst*95/100 {
				t.Errorf("%d/s, burst %v: critical requests served at once: %d measured, %d fixed", c.perSecond(), burst, measured.criticalFirst, fixed.criticalFirst)
			}
			if measured.served < fixed.served {
				t.Errorf("%d/s, burst %v: %d requests served in the end with the measured Retry-After, %d with a fixed second", c.perSecond(), burst, measured.served, fixed.served)
			}
		}
	}
}

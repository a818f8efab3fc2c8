package redispacer_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/retryhttp/retryhttp"
	"github.com/retryhttp/retryhttp/redispacer"
	"github.com/retryhttp/retryhttp/shared/testenv"
)

// fleetEnv holds a fleet process's spec (fleetSpec, in JSON).
const fleetEnv = "REDISPACER_TEST_FLEET"

// fleetSpec is what one process of the fleet does: from Start to End,
// Clients goroutines each send a GET to URL every Every, one attempt
// each, through one Transport whose Pacer keeps its quotas in Redis at
// Prefix (or in the process, if Prefix is "").
type fleetSpec struct {
	URL, Redis, Prefix string
	Start, End         time.Time
	Clients            int
	Every              time.Duration
}

// fleetProcess runs one process of the fleet; its exit code.
func fleetProcess(spec string) int {
	var s fleetSpec
	if err := json.Unmarshal([]byte(spec), &s); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	pacer := &retryhttp.Pacer{MaxWait: 5 * time.Second}
	if s.Prefix != "" {
		c := redis.NewClient(&redis.Options{Addr: s.Redis})
		defer c.Close()
		store, err := redispacer.New(c, redispacer.Options{Prefix: s.Prefix})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		pacer.Store = store
	}
	client := &http.Client{Transport: &retryhttp.Transport{
		Pacer:  pacer,
		Policy: retryhttp.Policy{MaxAttempts: 1},
		Logger: slog.New(slog.DiscardHandler),
	}}
	var wg sync.WaitGroup
	for c := range s.Clients {
		wg.Go(func() {
			for next := s.Start.Add(s.Every * time.Duration(c) / time.Duration(s.Clients)); next.Before(s.End); next = next.Add(s.Every) {
				time.Sleep(time.Until(next))
				ctx, cancel := context.WithDeadline(context.Background(), s.End)
				req, _ := http.NewRequestWithContext(ctx, "GET", s.URL+"/items", nil)
				if resp, err := client.Do(req); err == nil {
					resp.Body.Close()
				}
				cancel()
			}
		})
	}
	wg.Wait()
	return 0
}

// quotaHandler enforces n requests a window, the windows starting at
// start, and tells the count left and the reset in the headers of
// dialect: "github" (X-RateLimit-Remaining, and -Reset as a Unix time)
// or "ietf" (the RateLimit field, draft-11, t in whole seconds rounded
// up).
type quotaHandler struct {
	n       int
	window  time.Duration
	start   time.Time
	dialect string

	mu       sync.Mutex
	win      int64
	used     int
	served   atomic.Int64
	rejected atomic.Int64
}

func (q *quotaHandler) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	now := time.Now()
	q.mu.Lock()
	if win := int64(now.Sub(q.start) / q.window); win != q.win {
		q.win, q.used = win, 0
	}
	ok := q.used < q.n
	if ok {
		q.used++
	}
	left, reset := q.n-q.used, q.start.Add(time.Duration(q.win+1)*q.window)
	q.mu.Unlock()
	if q.dialect == "github" {
		w.Header().Set("X-RateLimit-Remaining", strconv.Itoa(left))
		w.Header().Set("X-RateLimit-Reset", strconv.FormatInt(reset.Unix(), 10))
	} else {
		w.Header().Set("RateLimit", fmt.Sprintf(`"default";r=%d;t=%d`, left, int(math.Ceil(reset.Sub(now).Seconds()))))
	}
	if !ok {
		q.rejected.Add(1)
		w.WriteHeader(http.StatusTooManyRequests)
		return
	}
	q.served.Add(1)
}

// Four processes on one API key, 2 clients each, offer 3 times a quota
// for several windows. With their Pacers' quotas in one Redis, 429s are
// at most 1% of the requests sent and the served at least 90% of the
// quota; each on its own, the 429s are counted for the contrast. The
// processes are this test binary started again, so nothing is shared but
// Redis.
func TestPacerFleetOnLoopback(t *testing.T) {
	_, _, prefix := newStore(t, redispacer.Options{})
	for _, tc := range []struct {
		dialect string
		n       int
		window  time.Duration
		phase   time.Duration // where in a second the windows start
	}{
		{"github", 60, time.Second, 0},
		{"ietf", 60, time.Second, 0},
		{"ietf", 100, 2 * time.Second, 400 * time.Millisecond},
	} {
		name := fmt.Sprintf("%s/%d per %v/+%v", tc.dialect, tc.n, tc.window, tc.phase)
		for _, shared := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/shared=%v", name, shared), func(t *testing.T) {
				t.Parallel() // they wait more than they work
				windows := int(4 * time.Second / tc.window)
				// The processes start within a second; the quota's count
				// starts with a window.
				start := time.Now().Truncate(time.Second).Add(2*time.Second + tc.phase)
				q := &quotaHandler{n: tc.n, window: tc.window, start: start, dialect: tc.dialect}
				srv := httptest.NewServer(q)
				defer srv.Close()
				spec := fleetSpec{URL: srv.URL, Redis: testenv.RedisAddr(), Start: start, End: start.Add(time.Duration(windows) * tc.window), Clients: 2}
				if shared {
					spec.Prefix = prefix + name + ":"
				}
				spec.Every = tc.window * 8 / time.Duration(3*tc.n) // 8 clients offering 3 times the quota
				js, _ := json.Marshal(spec)
				var wg sync.WaitGroup
				for range 4 {
					cmd := exec.Command(os.Args[0], "-test.run=^$")
					cmd.Env = append(os.Environ(), fleetEnv+"="+string(js))
					wg.Go(func() {
						if out, err := cmd.CombinedOutput(); err != nil {
							t.Errorf("a fleet process failed: %v\n%s", err, out)
						}
					})
				}
				wg.Wait()
				served, rejected := q.served.Load(), q.rejected.Load()
				quota := int64(tc.n * windows)
				t.Logf("%s, shared=%v: %d served (%.0f%% of the quota of %d), %d 429s (%.2f%% of those sent)",
					name, shared, served, 100*float64(served)/float64(quota), quota, rejected, 100*float64(rejected)/float64(max(1, served+rejected)))
				if !shared {
					return // the contrast: counted, not held to a bar
				}
				if rejected*100 > served+rejected {
					t.Errorf("%d 429s of %d sent: more than 1%%", rejected, served+rejected)
				}
				if served*100 < quota*90 {
					t.Errorf("%d served of a quota of %d: under 90%%", served, quota)
				}
			})
		}
	}
}

// Command limitfamily measures the adaptive concurrency limit on loopback
// against servers of a known capacity: how many requests the server holds
// in flight, as a multiple of its capacity c, under 48 callers through a
// retryhttp.Transport with an overload.Limiter, or under three times its
// capacity offered through an overload.Shedder; and how fast that count
// follows when c halves.
//
//	go run ./cmd/limitfamily -shapes linear,quadratic,queueing -c 4,8,16 -timeout=false,true
//
// A server of capacity c answers in base (10 ms) while at most c requests
// are in it; past c its latency rises as base·n/c (linear), base·(n/c)²
// (quadratic), as c workers serving a line in order (queueing), or as c
// workers serving it in no order (unordered, a lock under contention). Its handler
// watches its context: a request whose caller gave up leaves it. Each
// case runs a warm-up, then reads the mean in flight at the server for a
// few seconds, halves c, and reads the seconds until the mean over one
// second is within 1.5 times the new c, and the mean once it has settled.
// The same family runs in virtual time in overload's
// TestLimitFollowsCapacity; this is it on a real network stack, with its
// noise.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/retryhttp/retryhttp"
	"github.com/retryhttp/retryhttp/overload"
)

const base = 10 * time.Millisecond

func main() {
	shapes := flag.String("shapes", "linear,quadratic,queueing", "latency shapes past the capacity")
	caps := flag.String("c", "4,8,16", "capacities")
	timeouts := flag.String("timeout", "false,true", "with an attempt timeout of 3 base latencies (the client rows)")
	drivers := flag.String("drivers", "client,shedder", "client: 48 callers through Transport.Limit; shedder: 3x capacity through a Shedder")
	warm := flag.Duration("warm", 5*time.Second, "warm-up before the first reading")
	flag.Parse()
	log.SetFlags(0)
	fmt.Printf("%-8s %-9s %3s %-7s %10s %13s %9s %9s\n", "driver", "shape", "c", "timeout", "in flight/c", "after halving", "followed", "served/s")
	for _, drv := range strings.Split(*drivers, ",") {
		for _, sh := range strings.Split(*shapes, ",") {
			for _, cs := range strings.Split(*caps, ",") {
				c, err := strconv.Atoi(cs)
				if err != nil || c < 2 {
					log.Fatalf("capacity %q: want an integer of at least 2", cs)
				}
				for _, ts := range strings.Split(*timeouts, ",") {
					timeout := ts == "true"
					if drv == "shedder" && timeout {
						continue
					}
					r, err := run(drv, sh, c, timeout, *warm)
					if err != nil {
						log.Fatal(err)
					}
					fmt.Printf("%-8s %-9s %3d %-7v %10.2f %13.2f %8ds %9.0f\n", drv, sh, c, timeout, r.before, r.after, r.follow, r.rate)
				}
			}
		}
	}
}

// server is a server of capacity c (see the package doc).
type server struct {
	shape string

	c        atomic.Int64
	mu       sync.Mutex
	inflight int
	area     float64 // ∫ inflight dt since the last reading
	last     time.Time
	served   atomic.Int64
	// workers holds a token per busy worker (queueing): a channel's
	// waiters are served in order, the line of a server with a pool.
	// The capacity is halved by holding half its tokens.
	workers chan struct{}
	onHalve func(half int)

	// unordered: c workers whose line is served in no order, as a lock
	// under contention serves it.
	lineMu sync.Mutex
	busy   int
	line   []chan struct{}
}

// take waits for a worker (unordered), and reports whether it got one
// before ctx ended.
func (s *server) take(ctx context.Context) bool {
	s.lineMu.Lock()
	if s.busy < int(s.c.Load()) {
		s.busy++
		s.lineMu.Unlock()
		return true
	}
	ready := make(chan struct{})
	s.line = append(s.line, ready)
	s.lineMu.Unlock()
	select {
	case <-ready:
		return true
	case <-ctx.Done():
	}
	s.lineMu.Lock()
	defer s.lineMu.Unlock()
	select {
	case <-ready: // granted as ctx ended: hand it on
		s.busy--
		s.wake()
	default:
		s.line = slices.DeleteFunc(s.line, func(c chan struct{}) bool { return c == ready })
	}
	return false
}

// give frees a worker (unordered).
func (s *server) give() {
	s.lineMu.Lock()
	s.busy--
	s.wake()
	s.lineMu.Unlock()
}

// wake hands free workers to waiters picked at random. s.lineMu held.
func (s *server) wake() {
	for s.busy < int(s.c.Load()) && len(s.line) > 0 {
		i := rand.IntN(len(s.line))
		close(s.line[i])
		s.line = slices.Delete(s.line, i, i+1)
		s.busy++
	}
}

func (s *server) enter(d int) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	s.area += float64(s.inflight) * now.Sub(s.last).Seconds()
	s.last = now
	s.inflight += d
	return s.inflight
}

// mean returns the mean in flight since the last reading.
func (s *server) mean(since time.Duration) float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	s.area += float64(s.inflight) * now.Sub(s.last).Seconds()
	s.last = now
	m := s.area / since.Seconds()
	s.area = 0
	return m
}

func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := float64(s.enter(1))
	defer s.enter(-1)
	c := float64(s.c.Load())
	d := base
	switch s.shape {
	case "linear":
		d = time.Duration(float64(base) * max(1, n/c))
	case "quadratic":
		d = time.Duration(float64(base) * max(1, (n/c)*(n/c)))
	case "queueing":
		select {
		case s.workers <- struct{}{}:
		case <-r.Context().Done():
			return
		}
		defer func() { <-s.workers }()
	case "unordered":
		if !s.take(r.Context()) {
			return
		}
		defer s.give()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		s.served.Add(1)
	case <-r.Context().Done():
	}
}

type result struct {
	before, after float64
	follow        int
	rate          float64
}

func run(driver, shape string, c int, timeout bool, warm time.Duration) (result, error) {
	switch shape {
	case "linear", "quadratic", "queueing", "unordered":
	default:
		return result{}, fmt.Errorf("shape %q: want linear, quadratic, queueing or unordered", shape)
	}
	s := &server{shape: shape, last: time.Now(), workers: make(chan struct{}, c)}
	s.c.Store(int64(c))
	var h http.Handler = s
	if driver == "shedder" {
		sh, err := overload.NewShedder(overload.ShedOptions{})
		if err != nil {
			return result{}, err
		}
		h = sh.Handler(s)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	switch driver {
	case "client":
		tr := &retryhttp.Transport{Limit: &overload.Limiter{}, Logger: slog.New(slog.DiscardHandler),
			Base: &http.Transport{MaxIdleConnsPerHost: 64}}
		if timeout {
			tr.Policy.AttemptTimeout = 3 * base
		}
		cl := &http.Client{Transport: tr}
		for range 48 {
			wg.Go(func() {
				for ctx.Err() == nil {
					req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL, nil)
					resp, err := cl.Do(req)
					if err != nil {
						time.Sleep(base) // refused or failed: back off a base latency
						continue
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			})
		}
	case "shedder":
		cl := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256}}
		var offer atomic.Int64
		offer.Store(int64(c))
		s.onHalve = func(half int) { offer.Store(int64(half)) }
		wg.Go(func() {
			for ctx.Err() == nil {
				time.Sleep(base / time.Duration(3*offer.Load()))
				wg.Go(func() {
					req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL, nil)
					if resp, err := cl.Do(req); err == nil {
						io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
					}
				})
			}
		})
	default:
		cancel()
		return result{}, fmt.Errorf("driver %q: want client or shedder", driver)
	}
	r := measure(s, c, warm)
	cancel()
	wg.Wait()
	return r, nil
}

// measure warms up, reads the mean in flight, halves the capacity and
// reads how it follows.
func measure(s *server, c int, warm time.Duration) result {
	var r result
	time.Sleep(warm)
	s.mean(warm)
	start, served := time.Now(), s.served.Load()
	const reading = 5
	time.Sleep(reading * time.Second)
	r.before = s.mean(reading*time.Second) / float64(c)
	half := c / 2
	s.c.Store(int64(half))
	if s.shape == "queueing" {
		for range c - half {
			s.workers <- struct{}{} // held to the end: the workers lost
		}
	}
	if s.onHalve != nil {
		s.onHalve(half)
	}
	r.follow = -1
	var tail float64
	for i := 1; i <= 2*reading; i++ {
		time.Sleep(time.Second)
		m := s.mean(time.Second)
		if r.follow < 0 && m <= 1.5*float64(half) {
			r.follow = i
		}
		if i > reading {
			tail += m
		}
	}
	r.after = tail / reading / float64(half)
	r.rate = float64(s.served.Load()-served) / time.Since(start).Seconds()
	return r
}

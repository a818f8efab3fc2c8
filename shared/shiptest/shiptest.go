// Package shiptest is the shipping provider of the queue modules' kill
// tests: an HTTP service behind the idempotency middleware that ships the
// order its request body names, counting each order's shipments and every
// request, so that a test tells an order shipped twice from a shipment
// replayed to a consumer that ran it again.
package shiptest

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/retryhttp/retryhttp"
	"github.com/retryhttp/retryhttp/idempotency"
)

// Service is a shipping provider of the test's own.
type Service struct {
	URL string

	requests atomic.Int64
	mu       sync.Mutex
	shipped  map[string]int
}

// Start starts the service, each shipment taking took (so that a kill
// lands mid-shipment); it is closed when the test ends.
func Start(t testing.TB, took time.Duration) *Service {
	t.Helper()
	mw, err := idempotency.New(idempotency.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	s := &Service{shipped: map[string]int{}}
	ship := mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		time.Sleep(took)
		s.mu.Lock()
		s.shipped[string(body)]++
		s.mu.Unlock()
		w.WriteHeader(http.StatusCreated)
	}))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.requests.Add(1)
		ship.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	s.URL = srv.URL
	return s
}

// Orders is how many orders have shipped.
func (s *Service) Orders() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.shipped)
}

// Check fails t unless want orders shipped exactly once each, in more
// requests than orders: a kill test whose kills made no consumer run an
// order again tested nothing. It returns the requests.
func (s *Service) Check(t testing.TB, want int) int64 {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	for order, n := range s.shipped {
		if n != 1 {
			t.Errorf("%s shipped %d times, want 1", order, n)
		}
	}
	if len(s.shipped) != want {
		t.Errorf("%d orders shipped, want %d", len(s.shipped), want)
	}
	requests := s.requests.Load()
	if requests <= int64(len(s.shipped)) {
		t.Errorf("%d shipping requests for %d orders: no order was run again after a kill, so the kills tested nothing", requests, len(s.shipped))
	}
	return requests
}

// Shipper is how a consumer process ships an order to a Service: through
// a retryhttp.Transport that derives the call's Idempotency-Key from the
// operation in the context (the order, under a Runner), so that every
// run of one order sends the same key.
type Shipper struct {
	url    string
	client *http.Client
}

// NewShipper returns a Shipper to the service at url.
func NewShipper(url string) *Shipper {
	return &Shipper{url: url, client: &http.Client{Transport: &retryhttp.Transport{InjectIdempotencyKey: true, Logger: slog.New(slog.DiscardHandler),
		Policy: retryhttp.Policy{MaxAttempts: 3, BaseDelay: 5 * time.Millisecond, MaxDelay: 20 * time.Millisecond}}}}
}

// Ship ships order, and fails unless the service answers 201.
func (s *Shipper) Ship(ctx context.Context, order string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url, strings.NewReader(order))
	if err != nil {
		return err
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		return fmt.Errorf("shipping answered %d", resp.StatusCode)
	}
	return nil
}

// Kills runs the consumer processes of a kill test one after another and
// returns how many it killed. Each is started by start and killed with
// SIGKILL, by its pid, life (plus up to 150 ms, varied) after it sent its
// first shipment request: counted from its first request, not from its
// start, so that a consumer still starting on a loaded machine is not
// killed before it works, and every consumer ships something. during, if
// not nil, runs while a consumer works, before it is killed (a broker
// killed under it). Once nine tenths of the orders have shipped, a
// consumer is left to run until finished has held for half a second (its
// acknowledgements reach the broker), for up to a minute, and is then
// killed too; the test ends when finished holds after a kill. It fails t
// when a consumer sends no request for a minute, or five such last runs
// do not finish.
func (s *Service) Kills(t testing.TB, orders int, life time.Duration, start func() *exec.Cmd, finished func() bool, during func(kills int)) int {
	t.Helper()
	lastRuns := 0
	for kills := 0; ; kills++ {
		last := s.Orders() >= orders*9/10
		before := s.requests.Load()
		child := start()
		if err := child.Start(); err != nil {
			t.Fatal(err)
		}
		switch {
		case last:
			lastRuns++
			holds(finished, 500*time.Millisecond, time.Minute)
		case !s.waitRequest(before, time.Minute):
			stop(child)
			t.Fatalf("a consumer sent no shipment request in a minute (%d of %d orders shipped, %d consumers killed)", s.Orders(), orders, kills)
		default:
			time.Sleep(life + time.Duration(kills%4)*50*time.Millisecond)
			if during != nil {
				during(kills)
			}
		}
		stop(child)
		if finished() {
			return kills
		}
		if lastRuns == 5 {
			t.Fatalf("%d of %d orders shipped, and the work not finished, after five consumers' last runs and %d kills", s.Orders(), orders, kills)
		}
	}
}

// holds waits until cond has held for at least hold, looking every 50 ms,
// for up to max.
func holds(cond func() bool, hold, max time.Duration) {
	var since time.Time // when cond began to hold; zero while it does not
	for end := time.Now().Add(max); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		if !cond() {
			since = time.Time{}
			continue
		}
		if since.IsZero() {
			since = time.Now()
		}
		if time.Since(since) >= hold {
			return
		}
	}
}

// waitRequest waits until the service has had more than before requests,
// for up to max, and reports whether it did.
func (s *Service) waitRequest(before int64, max time.Duration) bool {
	for end := time.Now().Add(max); s.requests.Load() <= before; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(end) {
			return false
		}
	}
	return true
}

// stop kills a consumer process with SIGKILL, by its pid, and waits for it.
func stop(child *exec.Cmd) {
	child.Process.Signal(syscall.SIGKILL)
	child.Wait()
}

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
	"strings"
	"sync"
	"sync/atomic"
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

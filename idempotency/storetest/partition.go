package storetest

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retryhttp/retryhttp/idempotency"
)

// RunPartition runs the fencing scenario on two instances of a service
// that share records: partitioned reaches the store through a link that
// stall cuts off without closing it (a fault proxy's Stall), direct is the
// other instance's store on the same records. While the first instance's
// handler runs, the link stalls: its extensions get no answer and its
// claim lapses, and a retry on the other instance takes the key. The
// first handler's context must end with idempotency.ErrClaimLapsed
// before the claim can lapse, so the charge happens once. The caller
// heals the link.
func RunPartition(t *testing.T, partitioned, direct idempotency.Store, stall func()) {
	t.Helper()
	var charges atomic.Int32
	var stopped atomic.Value
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(2500 * time.Millisecond):
			charges.Add(1)
			w.WriteHeader(http.StatusCreated)
		case <-r.Context().Done():
			stopped.Store(context.Cause(r.Context()))
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	})
	instance := func(s idempotency.Store) string {
		m, err := idempotency.New(idempotency.Options{Store: s, LockTimeout: time.Second, Logger: slog.New(slog.DiscardHandler)})
		must(t, err)
		srv := httptest.NewServer(m.Handler(h))
		t.Cleanup(srv.Close)
		return srv.URL
	}
	a, b := instance(partitioned), instance(direct)
	first := make(chan int, 1)
	go func() { first <- post(t, a, "partition-1", "", `{"amount":1}`).status }()
	time.Sleep(500 * time.Millisecond)
	stall()
	time.Sleep(time.Second) // past the claim's lock, which the first instance could not extend
	if r := post(t, b, "partition-1", "", `{"amount":1}`); r.status != http.StatusCreated {
		t.Fatalf("retry on the other instance: %d %s, want 201", r.status, r.body)
	}
	if code := <-first; code != http.StatusServiceUnavailable {
		t.Fatalf("partitioned instance answered %d, want 503 (its handler stopped)", code)
	}
	if n := charges.Load(); n != 1 {
		t.Fatalf("%d charges, want 1", n)
	}
	if err, _ := stopped.Load().(error); !errors.Is(err, idempotency.ErrClaimLapsed) {
		t.Fatalf("the partitioned handler's context ended with %v, want ErrClaimLapsed", err)
	}
}

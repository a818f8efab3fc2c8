package outbox_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/retryhttp/retryhttp/outbox"
	"github.com/retryhttp/retryhttp/outbox/internal/outboxtest"
)

// BenchmarkRelay: 2,000 messages, each committed in its own transaction by
// 8 writers as fast as they go, delivered to a loopback receiver by 1 or 4
// relays: messages delivered per second (bounded here by the writers'
// commits) and the time from each message's commit to its arrival, p50 and
// p99. Then a backlog of 5,000 messages committed while no relay ran,
// drained: the relays' own rate. Run it with -benchtime=1x.
func BenchmarkRelay(b *testing.B) {
	for _, relays := range []int{1, 4} {
		b.Run(fmt.Sprintf("relays=%d", relays), func(b *testing.B) {
			for b.Loop() {
				benchRelay(b, relays, 2000)
				benchDrain(b, relays, 5000)
			}
		})
	}
}

func benchDrain(b *testing.B, relays, n int) {
	p := outboxtest.Pool(b)
	o := outboxtest.New(b, p)
	var mu sync.Mutex
	got := 0
	done := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		if got++; got == n {
			close(done)
		}
		mu.Unlock()
	}))
	defer srv.Close()
	drained := func() bool {
		select {
		case <-done:
			return true
		default:
			return false
		}
	}
	b.ReportMetric(outboxtest.Drain(b, p, o, srv.URL+"/events", n, relays, nil, drained), "drain-msgs/s")
}

func benchRelay(b *testing.B, relays, n int) {
	p := outboxtest.Pool(b)
	o := outboxtest.New(b, p)
	var mu sync.Mutex
	arrived := make(map[string]time.Time, n)
	done := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		now := time.Now()
		mu.Lock()
		arrived[r.Header.Get("Idempotency-Key")] = now
		if len(arrived) == n {
			close(done)
		}
		mu.Unlock()
	}))
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for range relays {
		r, err := outbox.NewRelay(outbox.RelayOptions{Outbox: o, Logger: outboxtest.Quiet})
		if err != nil {
			b.Fatal(err)
		}
		wg.Go(func() { r.Run(ctx) })
	}
	time.Sleep(100 * time.Millisecond) // the relays are listening

	committed := make(map[string]time.Time, n)
	var cmu sync.Mutex
	start := time.Now()
	var writers sync.WaitGroup
	per := n / 8
	for range 8 {
		writers.Go(func() {
			for range per {
				tx, err := p.Begin(ctx)
				if err != nil {
					b.Error(err)
					return
				}
				id, err := o.Enqueue(ctx, tx, outbox.Message{URL: srv.URL + "/events", Body: []byte(`{"kind":"order.paid"}`)})
				if err != nil {
					b.Error(err)
					return
				}
				if err := tx.Commit(ctx); err != nil {
					b.Error(err)
					return
				}
				t := time.Now()
				cmu.Lock()
				committed[id] = t
				cmu.Unlock()
			}
		})
	}
	writers.Wait()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		b.Fatal("not all delivered")
	}
	elapsed := time.Since(start)
	cancel()
	wg.Wait()
	lat := make([]time.Duration, 0, n)
	mu.Lock()
	for id, at := range arrived {
		if c, ok := committed[id]; ok {
			lat = append(lat, max(0, at.Sub(c)))
		}
	}
	mu.Unlock()
	slices.Sort(lat)
	b.ReportMetric(float64(n)/elapsed.Seconds(), "live-msgs/s")
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
}

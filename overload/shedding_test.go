package overload_test

import (
	"context"
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
	"github.com/retryhttp/retryhttp/overload"
)

// capacity is a handler that serves workers requests at once, each in
// service: the rest wait for a worker, as on a saturated server, so that
// its latency rises with its load.
func capacity(workers int, service time.Duration) http.Handler {
	sem := make(chan struct{}, workers)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case sem <- struct{}{}:
		case <-r.Context().Done():
			return
		}
		time.Sleep(service)
		<-sem
	})
}

// Under three times the load the handler can serve, end to end over
// loopback: the priorities travel from the client's context through a
// retryhttp.Transport, sheddable requests are refused, and the critical
// ones are served.
func TestShedderUnderOverload(t *testing.T) {
	if testing.Short() {
		t.Skip("a 2-second load test")
	}
	const (
		workers = 4
		service = 20 * time.Millisecond
		rate    = 3 * workers * int(time.Second/service) // 3x capacity: 600 requests/s
		length  = 2 * time.Second
	)
	s, err := overload.NewShedder(overload.ShedOptions{Limit: overload.Options{Queue: 64, MaxWait: time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	var reached [3]atomic.Int64
	work := capacity(workers, service)
	srv := httptest.NewServer(s.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, _ := overload.PriorityFrom(r.Context())
		reached[p].Add(1)
		work.ServeHTTP(w, r)
	})))
	defer srv.Close()
	base := &http.Transport{MaxIdleConnsPerHost: 1024}
	defer base.CloseIdleConnections()
	client := &http.Client{Transport: &retryhttp.Transport{Base: base, Policy: retryhttp.Policy{MaxAttempts: 1}, Logger: slog.New(slog.DiscardHandler)}}

	// Of every 6 requests, 1 is critical (half of what the handler can
	// serve), 2 default and 3 sheddable.
	mix := []overload.Priority{overload.Critical, overload.Default, overload.Default, overload.Sheddable, overload.Sheddable, overload.Sheddable}
	var sent, ok [3]atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for n := 0; ; n++ {
		due := start.Add(time.Duration(n) * time.Second / time.Duration(rate))
		if due.Sub(start) >= length {
			break
		}
		time.Sleep(time.Until(due))
		p := mix[n%len(mix)]
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(overload.WithPriority(context.Background(), p), 5*time.Second)
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
			sent[p].Add(1)
			resp, err := client.Do(req)
			if err != nil {
				return
			}
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				ok[p].Add(1)
			}
		})
	}
	wg.Wait()
	share := func(p overload.Priority) float64 { return float64(ok[p].Load()) / float64(sent[p].Load()) }
	t.Logf("served: critical %d/%d (%.1f%%), default %d/%d (%.1f%%), sheddable %d/%d (%.1f%%)",
		ok[overload.Critical].Load(), sent[overload.Critical].Load(), 100*share(overload.Critical),
		ok[overload.Default].Load(), sent[overload.Default].Load(), 100*share(overload.Default),
		ok[overload.Sheddable].Load(), sent[overload.Sheddable].Load(), 100*share(overload.Sheddable))
	if got := share(overload.Critical); got < 0.95 {
		t.Errorf("critical requests served: %.1f%%, want at least 95%%", 100*got)
	}
	if got := share(overload.Sheddable); got > 0.5 {
		t.Errorf("sheddable requests served: %.1f%%, want most refused", 100*got)
	}
	if share(overload.Sheddable) >= share(overload.Default) {
		t.Errorf("sheddable requests served as often as default ones (%.2f, %.2f)", share(overload.Sheddable), share(overload.Default))
	}
	for p := range reached {
		if reached[p].Load() != ok[p].Load() {
			t.Errorf("%v: the handler ran %d, %d were served: a shed request reached it, or a served one failed", overload.Priority(p), reached[p].Load(), ok[p].Load())
		}
	}
}

// A priority travels down a chain of calls: the client's context, its
// Transport's header, the first service's Shedder, the handler's context,
// that service's Transport, the second service.
func TestPriorityTravelsDownstream(t *testing.T) {
	got := make(chan string, 1)
	second := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Get(overload.PriorityHeader)
	}))
	defer second.Close()
	out := &http.Client{Transport: &retryhttp.Transport{}}
	first := httptest.NewServer((&overload.Shedder{}).Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, _ := http.NewRequestWithContext(r.Context(), http.MethodGet, second.URL, nil)
		resp, err := out.Do(req)
		if err != nil {
			t.Error(err)
			return
		}
		resp.Body.Close()
	})))
	defer first.Close()
	req, _ := http.NewRequestWithContext(overload.WithPriority(context.Background(), overload.Sheddable), http.MethodGet, first.URL, nil)
	resp, err := (&http.Client{Transport: &retryhttp.Transport{}}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if p := <-got; p != "sheddable" {
		t.Fatalf("the second service saw priority %q, want sheddable", p)
	}
	http.DefaultTransport.(*http.Transport).CloseIdleConnections()
}

// Outside the idempotency middleware, a shed request claims no key: its
// retry with the same key runs the handler as a first attempt, and is not
// answered 409.
func TestShedBeforeTheIdempotencyMiddleware(t *testing.T) {
	mw, err := idempotency.New(idempotency.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	shed, err := overload.NewShedder(overload.ShedOptions{Limit: overload.Options{Min: 1, Max: 1}})
	if err != nil {
		t.Fatal(err)
	}
	release, started := make(chan struct{}), make(chan struct{}, 1)
	var charges atomic.Int64
	h := shed.Handler(mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Idempotency-Key") == "busy" {
			started <- struct{}{}
			<-release
		} else {
			charges.Add(1)
		}
		w.WriteHeader(http.StatusCreated)
	})))
	post := func(key string) int {
		r := httptest.NewRequest(http.MethodPost, "/charges", strings.NewReader(`{"amount":1}`))
		r.Header.Set("Idempotency-Key", key)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code
	}
	done := make(chan int)
	go func() { done <- post("busy") }()
	<-started
	if code := post("order-1"); code != http.StatusServiceUnavailable {
		t.Fatalf("a request over the limit: %d, want 503", code)
	}
	close(release)
	if code := <-done; code != http.StatusCreated {
		t.Fatalf("the request that held the limit: %d", code)
	}
	if code := post("order-1"); code != http.StatusCreated {
		t.Fatalf("the shed request's retry: %d, want 201 (a first attempt)", code)
	}
	if code := post("order-1"); code != http.StatusCreated || charges.Load() != 1 {
		t.Fatalf("a replay: %d, %d charges; want the stored 201 and 1 charge", code, charges.Load())
	}
}

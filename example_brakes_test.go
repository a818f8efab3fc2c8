package retryhttp_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/retryhttp/retryhttp"
)

func alwaysDown() *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
}

// One budget shared by every client of a dependency: together they add at
// most 10% retries (plus 1 per second), however long it is down.
func ExampleNewBudget() {
	var attempts atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		attempts.Add(1)
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer srv.Close()

	budget, err := retryhttp.NewBudget(retryhttp.BudgetOptions{Ratio: 0.1, MinPerSecond: 1})
	if err != nil {
		panic(err)
	}
	client := &http.Client{Transport: &retryhttp.Transport{
		Budget: budget,
		Policy: retryhttp.Policy{BaseDelay: time.Millisecond, MaxDelay: time.Millisecond},
	}}
	for range 50 {
		resp, err := client.Get(srv.URL)
		if err == nil {
			resp.Body.Close()
		}
	}
	// 50 requests: 50 first attempts + 10 s × 1/s floor + 10% of 50 = 65.
	fmt.Println("attempts:", attempts.Load())
	// Output: attempts: 65
}

// A breaker per host fails fast while a dependency is down, instead of
// adding load to it.
func ExampleNewBreaker() {
	srv := alwaysDown()
	defer srv.Close()

	breaker, err := retryhttp.NewBreaker(retryhttp.BreakerOptions{Failures: 3, OpenFor: 30 * time.Second})
	if err != nil {
		panic(err)
	}
	client := &http.Client{Transport: &retryhttp.Transport{
		Breaker: breaker,
		Policy:  retryhttp.Policy{BaseDelay: time.Millisecond, MaxDelay: time.Millisecond},
	}}
	resp, err := client.Get(srv.URL) // three 503s trip it
	if err == nil {
		fmt.Println("first call:", resp.StatusCode)
		resp.Body.Close()
	}
	_, err = client.Get(srv.URL)
	fmt.Println("second call fails fast:", errors.Is(err, retryhttp.ErrCircuitOpen))
	// Output:
	// first call: 503
	// second call fails fast: true
}

// Metrics registered on your own registry; serve it with promhttp.
func ExampleNewMetrics() {
	reg := prometheus.NewRegistry()
	metrics, err := retryhttp.NewMetrics(reg, retryhttp.MetricsOptions{})
	if err != nil {
		panic(err)
	}
	srv := flaky()
	defer srv.Close()
	client := &http.Client{Transport: &retryhttp.Transport{
		Hooks:  []retryhttp.Hook{metrics},
		Policy: retryhttp.Policy{BaseDelay: time.Millisecond},
	}}
	resp, err := client.Get(srv.URL)
	if err != nil {
		panic(err)
	}
	resp.Body.Close()

	fams, _ := reg.Gather()
	for _, f := range fams {
		if f.GetName() == "retryhttp_retries_total" {
			for _, m := range f.Metric {
				fmt.Println(f.GetName(), m.Label[0].GetValue(), m.Counter.GetValue())
			}
		}
	}
	// Output: retryhttp_retries_total 503 2
}

// Logs: one Debug record per retry, one Warn per give-up; never bodies,
// query strings or credentials.
func ExampleTransport_logger() {
	srv := flaky()
	defer srv.Close()
	logger := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{
		Level: slog.LevelDebug, // retries are Debug records; give-ups Warn
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey || a.Key == "host" {
				return slog.Attr{} // keep the output stable for this example
			}
			return a
		},
	}))
	client := &http.Client{Transport: &retryhttp.Transport{
		Logger: logger,
		Policy: retryhttp.Policy{BaseDelay: 10 * time.Millisecond, Jitter: retryhttp.JitterNone},
	}}
	resp, err := client.Get(srv.URL + "/items?token=secret")
	if err != nil {
		panic(err)
	}
	resp.Body.Close()
	// Output:
	// level=DEBUG msg="retryhttp: retrying" method=GET path=/items attempt=1 trigger=503 status=503 wait=10ms
	// level=DEBUG msg="retryhttp: retrying" method=GET path=/items attempt=2 trigger=503 status=503 wait=20ms
}

// A HookFunc feeds every retry decision to your own telemetry; an
// injected Idempotency-Key is visible on e.Request.
func ExampleTransport_hooks() {
	srv := flaky()
	defer srv.Close()
	client := &http.Client{Transport: &retryhttp.Transport{
		Policy: retryhttp.Policy{BaseDelay: 10 * time.Millisecond, Jitter: retryhttp.JitterNone},
		Hooks: []retryhttp.Hook{retryhttp.HookFunc(func(_ context.Context, e retryhttp.Event) {
			if e.Kind == retryhttp.EventRetry || e.Kind == retryhttp.EventGiveUp {
				fmt.Printf("attempt %d: %s, retrying in %v\n", e.Attempt, e.Trigger, e.Wait)
			}
		})},
	}}
	resp, err := client.Get(srv.URL)
	if err != nil {
		panic(err)
	}
	resp.Body.Close()
	fmt.Println("final:", resp.StatusCode)
	// Output:
	// attempt 1: 503, retrying in 10ms
	// attempt 2: 503, retrying in 20ms
	// final: 200
}

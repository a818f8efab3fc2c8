package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/retryhttp/retryhttp"
)

// hedgeLive is the hedging fan-out run live: servers loopback HTTP
// servers, each answering after a latency drawn from tailLatency (capped
// at 2 s), and reads fan-outs of keys requests each, spread over them,
// through a real Transport, without hedging, with a hedge after 10 ms, and
// with one after each server's 95th percentile as the Transport learns it.
// It prints each run's read latencies and the requests sent.
func hedgeLive(w io.Writer, servers, reads, keys int, seed uint64) error {
	var mu sync.Mutex
	rng := rand.New(rand.NewPCG(seed, 2013))
	latency := func() time.Duration {
		mu.Lock()
		defer mu.Unlock()
		return min(tailLatency(rng), 2*time.Second)
	}
	var served atomic.Int64
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served.Add(1)
		select {
		case <-time.After(latency()):
			io.WriteString(w, "value")
		case <-r.Context().Done():
		}
	})
	var urls []string
	for range servers {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return fmt.Errorf("listen on loopback: %w", err)
		}
		srv := &http.Server{Handler: handler}
		go srv.Serve(ln)
		defer srv.Close()
		urls = append(urls, "http://"+ln.Addr().String()+"/")
	}
	base := &http.Transport{MaxIdleConnsPerHost: 2 * keys / servers, IdleConnTimeout: 10 * time.Second}
	defer base.CloseIdleConnections()

	type run struct {
		name          string
		p50, p99, max time.Duration
		requests      int64
	}
	var runs []run
	for _, hedge := range []*retryhttp.Hedging{nil, {Delay: 10 * time.Millisecond}, {}} {
		tr := &retryhttp.Transport{Base: base, Hedge: hedge, Budget: retryhttp.NoBudget, Logger: slog.New(slog.DiscardHandler)}
		client := &http.Client{Transport: tr}
		served.Store(0)
		lat := make([]time.Duration, reads)
		for r := range reads {
			start := time.Now()
			var wg sync.WaitGroup
			for k := range keys {
				wg.Go(func() {
					req, _ := http.NewRequestWithContext(context.Background(), "GET", urls[k%servers], nil)
					if resp, err := client.Do(req); err == nil {
						io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
					}
				})
			}
			wg.Wait()
			lat[r] = time.Since(start)
		}
		name := "no hedging"
		switch {
		case hedge == nil:
		case hedge.Delay > 0:
			name = "hedge after 10 ms"
		default:
			name = "hedge after the learnt p95"
		}
		runs = append(runs, run{name: name, p50: quantile(lat, 0.5), p99: quantile(lat, 0.99), max: quantile(lat, 1), requests: served.Load()})
	}
	fmt.Fprintf(w, "retrystorm -hedge: %d reads of %d keys over %d loopback servers (live)\n\n", reads, keys, servers)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "run\tread p50\tread p99\tslowest read\trequests\textra\t")
	for _, r := range runs {
		extra := 100 * (float64(r.requests)/float64(reads*keys) - 1)
		fmt.Fprintf(tw, "%s\t%v\t%v\t%v\t%d\t%+.1f%%\t\n", r.name, r.p50.Round(100*time.Microsecond), r.p99.Round(100*time.Microsecond),
			r.max.Round(100*time.Microsecond), r.requests, extra)
	}
	return tw.Flush()
}

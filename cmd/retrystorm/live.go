package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/retryhttp/retryhttp"
)

// runLive runs a strategy through a scenario against a real HTTP server on
// loopback: one retryhttp.Transport per client, as in a fleet of callers,
// over a shared pool of connections. progress is called with the time
// since the start while it runs.
func runLive(sc scenario, st strategy, progress func(time.Duration)) (result, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return result{}, fmt.Errorf("listen on loopback: %w", err)
	}
	capSrv := newCapacityServer(sc)
	start := time.Now()
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		if !capSrv.admit(time.Since(start)) {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	})}
	go srv.Serve(ln)
	defer srv.Close()

	conns := max(sc.clients, int(sc.rate))
	base := &http.Transport{MaxIdleConns: conns, MaxIdleConnsPerHost: conns, IdleConnTimeout: 10 * time.Second}
	defer base.CloseIdleConnections()
	budget := retryhttp.NoBudget
	if st.budget {
		var err error
		if budget, err = retryhttp.NewBudget(retryhttp.BudgetOptions{Ratio: sc.budget.ratio, MinPerSecond: sc.budget.floor, Window: sc.budget.window}); err != nil {
			return result{}, err
		}
	}
	var throttle *retryhttp.Throttle // shared by the clients, as one service's Transports would share it
	if st.throttle {
		if throttle, err = retryhttp.NewThrottle(retryhttp.ThrottleOptions{Window: throttleWindow}); err != nil {
			return result{}, err
		}
	}
	url := "http://" + ln.Addr().String() + "/"

	res := result{strategy: st.name, giveUps: map[string]int{}, recovery: sc.recovery()}
	var mu sync.Mutex
	var wg sync.WaitGroup
	one := func() {
		defer wg.Done()
		var giveUp retryhttp.Reason
		tr := &retryhttp.Transport{
			Base: base, Policy: st.policy, Budget: budget, Throttle: throttle,
			Logger: slog.New(slog.DiscardHandler), // the demo's output is its table
			Hooks: []retryhttp.Hook{retryhttp.HookFunc(func(_ context.Context, e retryhttp.Event) {
				if e.Kind == retryhttp.EventRetry || e.Kind == retryhttp.EventGiveUp {
					giveUp = e.GiveUp
				}
			})},
		}
		ctx, cancel := context.WithTimeout(context.Background(), sc.deadline)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := (&http.Client{Transport: tr}).Do(req)
		ok := err == nil && resp.StatusCode == http.StatusOK
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		mu.Lock()
		defer mu.Unlock()
		res.finished = max(res.finished, time.Since(start))
		switch {
		case ok:
			res.succeeded++
		case giveUp != retryhttp.ReasonNone:
			res.giveUps[giveUp.String()]++
		case errors.Is(err, context.DeadlineExceeded):
			res.giveUps[retryhttp.ReasonDeadline.String()]++
		default:
			res.giveUps["error"]++
		}
	}

	done := make(chan struct{})
	go func() {
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				progress(time.Since(start))
			}
		}
	}()
	if sc.rate > 0 {
		n := int(sc.rate * sc.duration.Seconds())
		res.logical = n
		for i := range n {
			at := time.Duration(float64(i) / sc.rate * float64(time.Second))
			if d := at - time.Since(start); d > 0 {
				time.Sleep(d)
			}
			wg.Add(1)
			go one()
		}
	} else {
		res.logical = sc.clients
		for range sc.clients {
			wg.Add(1)
			go one()
		}
	}
	wg.Wait()
	close(done)
	res.load = capSrv.loads()
	res.calls = sum(res.load)
	return res, nil
}

func sum(xs []int) int {
	n := 0
	for _, x := range xs {
		n += x
	}
	return n
}

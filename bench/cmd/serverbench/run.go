package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/retryhttp/retryhttp/idempotency"
)

type config struct {
	levels   []int
	rounds   int
	duration time.Duration
	keys     int
	run      [nVariants]bool // which variants run
}

// The variants, in table order.
const (
	vHandler = iota
	vFloorNew
	vNew
	vFloorRead
	vReplay
	nVariants
)

var variantNames = [nVariants]string{"handler", "floor 2 cmds", "new key", "floor read", "replay"}

// sample is one variant's run in one round.
type sample struct {
	rps      float64
	p50, p99 time.Duration
	errors   int64
}

var body = []byte(`{"amount":100,"currency":"eur","customer":"cus_8VHk2Lr","description":"order 1234","metadata":{"a":1}}`)

const authorization = "Bearer sk_test_serverbench"

func handler(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	io.WriteString(w, `{"id":"ch_1"}`)
}

// sink is a ResponseWriter that keeps the status and whether the
// response was a replay, reused across requests.
type sink struct {
	h      http.Header
	status int
}

func (w *sink) Header() http.Header         { return w.h }
func (w *sink) Write(p []byte) (int, error) { return len(p), nil }
func (w *sink) WriteHeader(s int)           { w.status = s }

// client is one worker's reused request and writer.
type client struct {
	req *http.Request
	w   sink
}

func newClient() *client {
	u, _ := url.Parse("http://api.test/v1/charges")
	req := &http.Request{Method: "POST", URL: u, Header: http.Header{
		"Content-Type": {"application/json"}, "Authorization": {authorization}, "Idempotency-Key": {""},
	}, ContentLength: int64(len(body))}
	return &client{req: req.WithContext(context.Background()), w: sink{h: http.Header{}}}
}

// serve sends one request with key through h and reports whether it was
// answered 201 by a replay; any other status is an error.
func (c *client) serve(h http.Handler, key string) (replayed bool, err error) {
	c.req.Header["Idempotency-Key"][0] = key
	c.req.Body = io.NopCloser(bytes.NewReader(body))
	clear(c.w.h)
	c.w.status = 0
	h.ServeHTTP(&c.w, c.req)
	if c.w.status != http.StatusCreated {
		return false, fmt.Errorf("status %d", c.w.status)
	}
	return c.w.h.Get(idempotency.HeaderReplayed) == "true", nil
}

// expect serves one request and reports an error unless it was answered
// 201, replayed or not as wanted.
func (c *client) expect(h http.Handler, key string, replay bool) error {
	replayed, err := c.serve(h, key)
	if err == nil && replayed != replay {
		err = fmt.Errorf("replayed %v, want %v", replayed, replay)
	}
	return err
}

// report is one store's results: samples[level][variant] over rounds.
type report struct {
	store   string
	levels  []int
	samples [][nVariants][]sample
}

func run(ctx context.Context, b *backend, cfg config) (*report, error) {
	m, err := idempotency.New(idempotency.Options{Store: b.store, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return nil, err
	}
	mw := m.Handler(http.HandlerFunc(handler))
	bare := http.HandlerFunc(handler)
	runID := make([]byte, 6)
	rand.Read(runID)
	prefix := hex.EncodeToString(runID)

	// The replays' keys, stored through the middleware. The memory store
	// may evict them to make room for new keys; seed stores them again
	// before each replay run.
	stored := make([]string, cfg.keys)
	storeKeys := make([]string, cfg.keys)
	scope, _ := idempotency.AuthorizationScope(newClient().req)
	for i := range stored {
		stored[i] = prefix + "-stored-" + strconv.Itoa(i)
		storeKeys[i] = idempotency.StoreKey(scope, stored[i])
	}
	seed := func() error {
		c := newClient()
		for _, k := range stored {
			if _, err := c.serve(mw, k); err != nil { // stored now, or still
				return fmt.Errorf("storing the replay keys: %w", err)
			}
		}
		return nil
	}
	if err := seed(); err != nil {
		return nil, err
	}

	var seq atomic.Int64 // new keys, unique in the run
	ops := [nVariants]func(c *client, i int) error{
		vHandler: func(c *client, i int) error { return c.expect(bare, prefix+"-h", false) },
		vFloorNew: func(c *client, i int) error {
			return b.floorNew(ctx, fmt.Sprintf("%s%052d", prefix, seq.Add(1)), response)
		},
		vNew: func(c *client, i int) error {
			return c.expect(mw, prefix+"-new-"+strconv.FormatInt(seq.Add(1), 10), false)
		},
		vFloorRead: func(c *client, i int) error { return b.floorRead(ctx, storeKeys[i%len(storeKeys)]) },
		vReplay:    func(c *client, i int) error { return c.expect(mw, stored[i%len(stored)], true) },
	}

	rep := &report{store: b.name, levels: cfg.levels, samples: make([][nVariants][]sample, len(cfg.levels))}
	// Warm connections and caches; not recorded.
	for v := range nVariants {
		if cfg.run[v] {
			measure(slices.Max(cfg.levels), cfg.duration/4, ops[v])
		}
	}
	for r := range cfg.rounds {
		for li, level := range cfg.levels {
			for k := range nVariants {
				v := (k + r) % nVariants // rotate which variant goes first
				if !cfg.run[v] {
					continue
				}
				if v == vReplay {
					if err := seed(); err != nil {
						return nil, err
					}
				}
				s := measure(level, cfg.duration, ops[v])
				if s.errors > 0 {
					return nil, fmt.Errorf("%s at %d: %d operations failed", variantNames[v], level, s.errors)
				}
				rep.samples[li][v] = append(rep.samples[li][v], s)
			}
		}
	}
	return rep, nil
}

// measure runs op from conc workers for d and returns the throughput and
// latency quantiles.
func measure(conc int, d time.Duration, op func(c *client, i int) error) sample {
	lat := make([][]time.Duration, conc)
	var stop atomic.Bool
	var errs atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for w := range conc {
		wg.Go(func() {
			c := newClient()
			l := make([]time.Duration, 0, 4096)
			for i := w; !stop.Load(); i += conc {
				t0 := time.Now()
				if err := op(c, i); err != nil {
					errs.Add(1)
				}
				l = append(l, time.Since(t0))
			}
			lat[w] = l
		})
	}
	time.Sleep(d)
	stop.Store(true)
	wg.Wait()
	elapsed := time.Since(start)
	all := slices.Concat(lat...)
	slices.Sort(all)
	return sample{
		rps:    float64(len(all)) / elapsed.Seconds(),
		p50:    quantile(all, 0.50),
		p99:    quantile(all, 0.99),
		errors: errs.Load(),
	}
}

func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(q*float64(len(sorted))))]
}

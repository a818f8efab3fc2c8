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
	vClaim
	vReplay
	vReplayCached
	nVariants
)

var variantNames = [nVariants]string{"handler", "floor 2 cmds", "new key", "floor read", "store claim", "replay", "replay cached"}

// replayed are the variants that read the replays' keys: they are stored
// again before each run.
func replayed(v int) bool { return v == vClaim || v == vReplay || v == vReplayCached }

// sample is one variant's run in one round.
type sample struct {
	rps      float64
	p50, p99 time.Duration
	errors   int64
	// Store round trips and commands (statements) per operation; zero
	// for the memory store.
	trips, commands float64
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
	// perProcess: a fleet's, whose levels are each process's concurrency.
	perProcess bool
}

// workload is one store's variants, ready to measure: ops[v] is one
// operation of variant v, and seed stores the replays' keys again.
type workload struct {
	ops  [nVariants]func(c *client, i int) error
	seed func() error
}

func prepare(ctx context.Context, b *backend, keys int) (*workload, error) {
	m, err := idempotency.New(idempotency.Options{Store: b.store, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return nil, err
	}
	mw := m.Handler(http.HandlerFunc(handler))
	// replay cached: a second middleware on the store, with the replay
	// cache (idempotency.Options.CacheEntries) holding every stored key.
	mc, err := idempotency.New(idempotency.Options{Store: b.store, CacheEntries: 2 * keys, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return nil, err
	}
	mwc := mc.Handler(http.HandlerFunc(handler))
	bare := http.HandlerFunc(handler)
	runID := make([]byte, 6)
	rand.Read(runID)
	prefix := hex.EncodeToString(runID)

	// The replays' keys, stored through the middleware. The memory store
	// may evict them to make room for new keys; seed stores them again
	// before each replay run.
	stored := make([]string, keys)
	storeKeys := make([]string, keys)
	scope, _ := idempotency.AuthorizationScope(newClient().req)
	for i := range stored {
		stored[i] = prefix + "-stored-" + strconv.Itoa(i)
		storeKeys[i] = idempotency.StoreKey(scope, stored[i])
	}
	w := &workload{seed: func() error {
		c := newClient()
		for _, k := range stored {
			if _, err := c.serve(mw, k); err != nil { // stored now, or still
				return fmt.Errorf("storing the replay keys: %w", err)
			}
			if _, err := c.serve(mwc, k); err != nil { // and in the cache
				return fmt.Errorf("caching the replay keys: %w", err)
			}
		}
		return nil
	}}
	if err := w.seed(); err != nil {
		return nil, err
	}

	var seq atomic.Int64 // new keys, unique in the run
	w.ops = [nVariants]func(c *client, i int) error{
		vHandler: func(c *client, i int) error { return c.expect(bare, prefix+"-h", false) },
		vFloorNew: func(c *client, i int) error {
			return b.floorNew(ctx, fmt.Sprintf("%s%052d", prefix, seq.Add(1)), response)
		},
		vNew: func(c *client, i int) error {
			return c.expect(mw, prefix+"-new-"+strconv.FormatInt(seq.Add(1), 10), false)
		},
		vFloorRead: func(c *client, i int) error { return b.floorRead(ctx, storeKeys[i%len(storeKeys)]) },
		vClaim: func(c *client, i int) error {
			k := storeKeys[i%len(storeKeys)]
			rec, err := b.store.Claim(ctx, idempotency.ClaimParams{Key: k, Fingerprint: "serverbench", Owner: "serverbench-claim", Lock: time.Minute})
			if err == nil && (rec == nil || rec.Response == nil) {
				err = fmt.Errorf("store claim of %s: no stored response", k)
			}
			return err
		},
		vReplay:       func(c *client, i int) error { return c.expect(mw, stored[i%len(stored)], true) },
		vReplayCached: func(c *client, i int) error { return c.expect(mwc, stored[i%len(stored)], true) },
	}
	return w, nil
}

// variant measures variant v of w at conc for d, storing the replays'
// keys again first.
func (w *workload) variant(b *backend, v, conc int, d time.Duration) (*raw, error) {
	if replayed(v) {
		if err := w.seed(); err != nil {
			return nil, err
		}
	}
	return measure(b, conc, d, w.ops[v]), nil
}

func run(ctx context.Context, b *backend, cfg config) (*report, error) {
	w, err := prepare(ctx, b, cfg.keys)
	if err != nil {
		return nil, err
	}
	rep := &report{store: b.name, levels: cfg.levels, samples: make([][nVariants][]sample, len(cfg.levels))}
	return rep, rounds(rep, cfg, func(v, conc int, d time.Duration) (*raw, error) { return w.variant(b, v, conc, d) })
}

// rounds fills rep with cfg's rounds of each variant it runs, measured by
// m, after a warm-up of each (connections, caches) that is not recorded.
// Each round runs every variant at every level, in a rotated order.
func rounds(rep *report, cfg config, m func(v, conc int, d time.Duration) (*raw, error)) error {
	for v := range nVariants {
		if cfg.run[v] {
			if _, err := m(v, slices.Max(cfg.levels), cfg.duration/4); err != nil {
				return err
			}
		}
	}
	for r := range cfg.rounds {
		for li, level := range cfg.levels {
			for k := range nVariants {
				v := (k + r) % nVariants // rotate which variant goes first
				if !cfg.run[v] {
					continue
				}
				got, err := m(v, level, cfg.duration)
				if err != nil {
					return err
				}
				s := got.sample()
				if s.errors > 0 {
					return fmt.Errorf("%s at %d: %d operations failed", variantNames[v], level, s.errors)
				}
				rep.samples[li][v] = append(rep.samples[li][v], s)
			}
		}
	}
	return nil
}

// raw is one run of a variant: every operation's latency, sorted, how
// long the run took, and what it sent to the store.
type raw struct {
	Latencies []time.Duration
	Elapsed   time.Duration
	Errors    int64
	Trips     int64 // store round trips
	Commands  int64 // store commands or statements
}

// measure runs op from conc workers for d.
func measure(b *backend, conc int, d time.Duration, op func(c *client, i int) error) *raw {
	lat := make([][]time.Duration, conc)
	var stop atomic.Bool
	var errs atomic.Int64
	var wg sync.WaitGroup
	trips0, cmds0 := b.sent()
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
	trips1, cmds1 := b.sent()
	all := slices.Concat(lat...)
	slices.Sort(all)
	return &raw{Latencies: all, Elapsed: elapsed, Errors: errs.Load(), Trips: trips1 - trips0, Commands: cmds1 - cmds0}
}

// merge is the runs of several processes measured at once as one: their
// throughputs add up, their latencies pool.
func merge(rs []*raw) *raw {
	m := &raw{}
	var rps float64
	for _, r := range rs {
		m.Latencies = append(m.Latencies, r.Latencies...)
		m.Errors += r.Errors
		m.Trips += r.Trips
		m.Commands += r.Commands
		rps += float64(len(r.Latencies)) / r.Elapsed.Seconds()
	}
	slices.Sort(m.Latencies)
	// The elapsed time that gives the summed throughput.
	m.Elapsed = time.Duration(float64(len(m.Latencies)) / rps * float64(time.Second))
	return m
}

func (r *raw) sample() sample {
	n := len(r.Latencies)
	s := sample{
		rps:    float64(n) / r.Elapsed.Seconds(),
		p50:    quantile(r.Latencies, 0.50),
		p99:    quantile(r.Latencies, 0.99),
		errors: r.Errors,
	}
	if n > 0 {
		s.trips = float64(r.Trips) / float64(n)
		s.commands = float64(r.Commands) / float64(n)
	}
	return s
}

func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(q*float64(len(sorted))))]
}

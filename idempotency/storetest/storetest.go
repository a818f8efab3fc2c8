// Package storetest is the conformance suite for idempotency.Store
// implementations: the Store API contract, and the middleware's end-to-end
// guarantees (scenarios A to M) over real HTTP. The memory, Redis,
// PostgreSQL, MySQL and DynamoDB stores all run it; so can yours.
package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retryhttp/retryhttp/idempotency"
)

// NewStore returns an empty store, isolated from every other store it
// returned (a fresh key prefix or table), and cleaned up with t.
type NewStore func(t *testing.T) idempotency.Store

// RunCached runs the scenarios in which a completed record is replayed,
// or must not be (A to E, G, H, K, L, M), with the replay cache on
// (CacheEntries) in every Middleware and Runner it builds over the store:
// the same answers, replays from memory where they can be. The scenarios
// of claims in flight (F, I, J), which no cache entry concerns, run in
// Run alone.
func RunCached(t *testing.T, newStore NewStore) {
	run(t, func(t *testing.T) idempotency.Store { return cachedStore{newStore(t)} }, true)
}

// cachedStore marks a store whose Middlewares and Runners cache replays.
type cachedStore struct{ idempotency.Store }

// cacheEntries is the cache RunCached turns on.
const cacheEntries = 1000

// middlewareOptions are opts on s, with the replay cache on for a store
// of RunCached.
func middlewareOptions(s idempotency.Store, opts idempotency.Options) idempotency.Options {
	opts.Store = s
	if cs, ok := s.(cachedStore); ok {
		opts.Store, opts.CacheEntries = cs.Store, cacheEntries
	}
	return opts
}

// runnerOptions are opts on s, as middlewareOptions.
func runnerOptions(s idempotency.Store, opts idempotency.RunnerOptions) idempotency.RunnerOptions {
	opts.Store = s
	if cs, ok := s.(cachedStore); ok {
		opts.Store, opts.CacheEntries = cs.Store, cacheEntries
	}
	return opts
}

// Run runs the whole suite.
func Run(t *testing.T, newStore NewStore) { run(t, newStore, false) }

func run(t *testing.T, newStore NewStore, replaysOnly bool) {
	t.Run("API", func(t *testing.T) { testAPI(t, newStore(t)) })
	t.Run("A sequential replays", func(t *testing.T) { testSequential(t, newStore(t)) })
	t.Run("B concurrent 8", func(t *testing.T) { testConcurrent(t, newStore(t), 8) })
	t.Run("B concurrent 64", func(t *testing.T) { testConcurrent(t, newStore(t), 64) })
	t.Run("C payload mismatch", func(t *testing.T) { testMismatch(t, newStore(t)) })
	t.Run("D retention shorter than retry window", func(t *testing.T) { testRetention(t, newStore(t)) })
	t.Run("E 503 is not stored", func(t *testing.T) { testNotStored(t, newStore(t)) })
	if !replaysOnly {
		t.Run("F crashed claim expires", func(t *testing.T) { testCrashedClaim(t, newStore(t)) })
	}
	t.Run("G scopes are independent", func(t *testing.T) { testScopes(t, newStore(t)) })
	t.Run("H X-Idempotency-Key is a key", func(t *testing.T) { testXKey(t, newStore(t)) })
	if !replaysOnly {
		t.Run("I a slow handler keeps its claim", func(t *testing.T) { testSlowHandler(t, newStore(t)) })
		t.Run("J a claim whose reply was lost is released", func(t *testing.T) { testLostClaimReply(t, newStore(t)) })
	}
	t.Run("K a job runs once per key", func(t *testing.T) { testRunner(t, newStore(t)) })
	t.Run("L the header policy covers trailers", func(t *testing.T) { testTrailers(t, newStore(t)) })
	t.Run("M one owner takes over an expired claim", func(t *testing.T) { testExpiredTakeover(t, newStore(t)) })
}

// short durations keep the time-based scenarios under a second of real time.
const (
	shortLock      = 1500 * time.Millisecond // its StoreTimeout (500 ms) leaves a loaded machine room: at 600 ms, 200 ms did not
	shortRetention = 300 * time.Millisecond
)

func testAPI(t *testing.T, s idempotency.Store) {
	ctx := context.Background()
	rec, err := s.Claim(ctx, idempotency.ClaimParams{Key: "k1", Fingerprint: "fp1", Owner: "owner-a", Lock: time.Minute})
	must(t, err)
	if rec != nil {
		t.Fatalf("first Claim returned %+v, want nil (claimed)", rec)
	}
	rec, err = s.Claim(ctx, idempotency.ClaimParams{Key: "k1", Fingerprint: "fp1", Owner: "owner-b", Lock: time.Minute})
	must(t, err)
	if rec == nil || rec.Fingerprint != "fp1" || rec.Response != nil {
		t.Fatalf("second Claim returned %+v, want the in-flight record of fp1", rec)
	}
	if err := s.Complete(ctx, idempotency.CompleteParams{Key: "k1", Owner: "owner-b", Response: &idempotency.Response{Status: 201}, Retention: time.Minute}); !errors.Is(err, idempotency.ErrNotOwner) {
		t.Fatalf("Complete by a non-owner: %v, want ErrNotOwner", err)
	}
	must(t, s.Release(ctx, idempotency.ReleaseParams{Key: "k1", Owner: "owner-b"})) // not the owner: nothing happens
	if rec, _ := s.Claim(ctx, idempotency.ClaimParams{Key: "k1", Fingerprint: "fp1", Owner: "owner-c", Lock: time.Minute}); rec == nil {
		t.Fatal("a non-owner's Release freed the claim")
	}
	resp := &idempotency.Response{Status: 201, Header: http.Header{"X-Id": {"7"}}, Body: []byte(`{"id":7}`)}
	must(t, s.Complete(ctx, idempotency.CompleteParams{Key: "k1", Owner: "owner-a", Response: resp, Retention: time.Minute}))
	rec, err = s.Claim(ctx, idempotency.ClaimParams{Key: "k1", Fingerprint: "fp1", Owner: "owner-d", Lock: time.Minute})
	must(t, err)
	if rec == nil || rec.Response == nil || rec.Response.Status != 201 || string(rec.Response.Body) != `{"id":7}` || rec.Response.Header.Get("X-Id") != "7" {
		t.Fatalf("after Complete, Claim returned %+v", rec)
	}
	must(t, s.Release(ctx, idempotency.ReleaseParams{Key: "k1", Owner: "owner-a"})) // completed: Release must not delete it
	if rec, _ := s.Claim(ctx, idempotency.ClaimParams{Key: "k1", Fingerprint: "fp1", Owner: "owner-e", Lock: time.Minute}); rec == nil || rec.Response == nil {
		t.Fatal("Release deleted a completed record")
	}

	// Claim is idempotent per owner: a repeated Claim (a client library
	// resending it after a lost reply) finds its own claim, not another's.
	rec, err = s.Claim(ctx, idempotency.ClaimParams{Key: "k5", Fingerprint: "fp", Owner: "owner-a", Lock: time.Minute})
	must(t, err)
	if rec != nil {
		t.Fatalf("first Claim of k5: %+v", rec)
	}
	rec, err = s.Claim(ctx, idempotency.ClaimParams{Key: "k5", Fingerprint: "fp", Owner: "owner-a", Lock: time.Minute})
	must(t, err)
	if rec != nil {
		t.Fatalf("the owner's repeated Claim returned %+v, want nil (still ours)", rec)
	}
	rec, err = s.Claim(ctx, idempotency.ClaimParams{Key: "k5", Fingerprint: "fp", Owner: "owner-b", Lock: time.Minute})
	must(t, err)
	if rec == nil || rec.Response != nil {
		t.Fatalf("another owner's Claim returned %+v, want the in-flight record", rec)
	}
	if !rec.Expires.IsZero() && (time.Until(rec.Expires) > time.Minute+time.Second || time.Until(rec.Expires) < 50*time.Second) {
		t.Fatalf("in-flight record expires in %v, want about the 1m lock", time.Until(rec.Expires))
	}
	must(t, s.Complete(ctx, idempotency.CompleteParams{Key: "k5", Owner: "owner-a", Response: &idempotency.Response{Status: 200}, Retention: time.Minute}))
	if rec, _ := s.Claim(ctx, idempotency.ClaimParams{Key: "k5", Fingerprint: "fp", Owner: "owner-a", Lock: time.Minute}); rec == nil || rec.Response == nil {
		t.Fatalf("after Complete, the owner's Claim returned %+v, want the completed record", rec)
	}

	// Extend keeps a claim past its lock; only its owner can, only while
	// it is in flight.
	// The owner's Extend must come before its claim lapses: on a machine
	// too loaded for that within the lock, the step is run again with a
	// fresh key and twice the lock, and judged only when it was in time.
	k6 := ""
	for lock := 300 * time.Millisecond; ; lock *= 2 {
		if lock > 10*time.Second {
			t.Fatal("no Extend came within its claim's lock, up to 10 s")
		}
		k6 = fmt.Sprint("k6-", lock)
		claimed := time.Now()
		_, err = s.Claim(ctx, idempotency.ClaimParams{Key: k6, Fingerprint: "fp", Owner: "owner-a", Lock: lock})
		must(t, err)
		if err := s.Extend(ctx, idempotency.ExtendParams{Key: k6, Owner: "owner-b", Lock: time.Minute}); !errors.Is(err, idempotency.ErrNotOwner) {
			t.Fatalf("Extend by a non-owner: %v, want ErrNotOwner", err)
		}
		err := s.Extend(ctx, idempotency.ExtendParams{Key: k6, Owner: "owner-a", Lock: time.Minute})
		if time.Since(claimed) >= lock {
			continue // too late to tell: the claim may have lapsed first
		}
		must(t, err)
		time.Sleep(lock + 100*time.Millisecond)
		break
	}
	if rec, _ := s.Claim(ctx, idempotency.ClaimParams{Key: k6, Fingerprint: "fp", Owner: "owner-b", Lock: time.Minute}); rec == nil {
		t.Fatal("an extended claim expired at its first lock")
	}
	must(t, s.Complete(ctx, idempotency.CompleteParams{Key: k6, Owner: "owner-a", Response: &idempotency.Response{Status: 200}, Retention: time.Minute}))
	if err := s.Extend(ctx, idempotency.ExtendParams{Key: k6, Owner: "owner-a", Lock: time.Minute}); !errors.Is(err, idempotency.ErrNotOwner) {
		t.Fatalf("Extend of a completed record: %v, want ErrNotOwner", err)
	}
	_, err = s.Claim(ctx, idempotency.ClaimParams{Key: "k7", Fingerprint: "fp", Owner: "owner-a", Lock: 100 * time.Millisecond})
	must(t, err)
	time.Sleep(200 * time.Millisecond)
	if err := s.Extend(ctx, idempotency.ExtendParams{Key: "k7", Owner: "owner-a", Lock: time.Minute}); !errors.Is(err, idempotency.ErrNotOwner) {
		t.Fatalf("Extend of an expired claim: %v, want ErrNotOwner", err)
	}

	// An owner's Release frees the key.
	_, err = s.Claim(ctx, idempotency.ClaimParams{Key: "k2", Fingerprint: "fp", Owner: "owner-a", Lock: time.Minute})
	must(t, err)
	must(t, s.Release(ctx, idempotency.ReleaseParams{Key: "k2", Owner: "owner-a"}))
	if rec, _ := s.Claim(ctx, idempotency.ClaimParams{Key: "k2", Fingerprint: "fp", Owner: "owner-b", Lock: time.Minute}); rec != nil {
		t.Fatalf("after Release, Claim returned %+v", rec)
	}

	// An expired claim is free, and its old owner can no longer complete it.
	_, err = s.Claim(ctx, idempotency.ClaimParams{Key: "k3", Fingerprint: "fp", Owner: "owner-a", Lock: 100 * time.Millisecond})
	must(t, err)
	time.Sleep(200 * time.Millisecond)
	if rec, _ := s.Claim(ctx, idempotency.ClaimParams{Key: "k3", Fingerprint: "fp", Owner: "owner-b", Lock: time.Minute}); rec != nil {
		t.Fatalf("an expired claim was not free: %+v", rec)
	}
	if err := s.Complete(ctx, idempotency.CompleteParams{Key: "k3", Owner: "owner-a", Response: &idempotency.Response{Status: 200}, Retention: time.Minute}); !errors.Is(err, idempotency.ErrNotOwner) {
		t.Fatalf("Complete by the expired owner: %v, want ErrNotOwner", err)
	}

	// Exactly one of many concurrent claims wins.
	var won atomic.Int32
	var wg sync.WaitGroup
	for i := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rec, err := s.Claim(ctx, idempotency.ClaimParams{Key: "k4", Fingerprint: "fp", Owner: fmt.Sprintf("owner-%d", i), Lock: time.Minute})
			if err != nil {
				t.Error(err)
			}
			if rec == nil {
				won.Add(1)
			}
		}()
	}
	wg.Wait()
	if won.Load() != 1 {
		t.Fatalf("%d concurrent claims won, want 1", won.Load())
	}
}

// charges is the side-effecting endpoint: it records a charge per call and
// answers 201 with the charge's id.
type charges struct {
	mu      sync.Mutex
	n       int
	delay   time.Duration
	fail    atomic.Int32 // answer 503 this many times first
	block   chan struct{}
	entered chan struct{} // told, if not nil and not full, when a request reaches the handler
}

func (c *charges) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if c.fail.Load() > 0 {
		c.fail.Add(-1)
		http.Error(w, "try again", http.StatusServiceUnavailable)
		return
	}
	if c.entered != nil {
		select {
		case c.entered <- struct{}{}:
		default:
		}
	}
	if c.block != nil {
		<-c.block
	}
	time.Sleep(c.delay)
	var in struct{ Amount int }
	json.NewDecoder(r.Body).Decode(&in)
	c.mu.Lock()
	c.n++
	id := c.n
	c.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Location", fmt.Sprintf("/charges/%d", id))
	w.WriteHeader(http.StatusCreated)
	fmt.Fprintf(w, `{"id":%d,"amount":%d}`, id, in.Amount)
}

func (c *charges) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

type result struct {
	status   int
	body     string
	replayed bool
}

func serve(t *testing.T, s idempotency.Store, c *charges, opts idempotency.Options) string {
	t.Helper()
	m, err := idempotency.New(middlewareOptions(s, opts))
	must(t, err)
	srv := httptest.NewServer(m.Handler(c))
	t.Cleanup(srv.Close)
	return srv.URL
}

func post(t *testing.T, url, key, auth, body string) result {
	t.Helper()
	req, _ := http.NewRequest("POST", url+"/charges", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Error(err)
		return result{}
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return result{resp.StatusCode, string(b), resp.Header.Get(idempotency.HeaderReplayed) == "true"}
}

func testSequential(t *testing.T, s idempotency.Store) {
	c := &charges{}
	url := serve(t, s, c, idempotency.Options{})
	var got []result
	for range 5 {
		got = append(got, post(t, url, "seq-1", "", `{"amount":100}`))
	}
	if c.count() != 1 {
		t.Fatalf("%d charges, want 1", c.count())
	}
	replays := 0
	for i, r := range got {
		if r.status != 201 || r.body != got[0].body {
			t.Errorf("response %d = %d %s, want the first: %d %s", i+1, r.status, r.body, got[0].status, got[0].body)
		}
		if r.replayed {
			replays++
		}
	}
	if got[0].replayed || replays != 4 {
		t.Errorf("%d replays (first replayed: %v), want 4 after a fresh first", replays, got[0].replayed)
	}
}

func testConcurrent(t *testing.T, s idempotency.Store, n int) {
	c := &charges{delay: 50 * time.Millisecond}
	url := serve(t, s, c, idempotency.Options{})
	results := make([]result, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = post(t, url, "conc-1", "", `{"amount":5}`)
		}()
	}
	wg.Wait()
	if c.count() != 1 {
		t.Fatalf("%d charges from %d concurrent requests, want 1", c.count(), n)
	}
	fresh := 0
	for _, r := range results {
		switch {
		case r.status == 201 && !r.replayed:
			fresh++
		case r.status == 201 && r.replayed, r.status == 409:
		default:
			t.Errorf("unexpected answer %d %s", r.status, r.body)
		}
	}
	if fresh != 1 {
		t.Errorf("%d fresh 201s, want 1", fresh)
	}
}

func testMismatch(t *testing.T, s idempotency.Store) {
	c := &charges{}
	url := serve(t, s, c, idempotency.Options{})
	if r := post(t, url, "mm-1", "", `{"amount":100,"currency":"EUR"}`); r.status != 201 {
		t.Fatalf("first: %d", r.status)
	}
	// Same object, other key order and spacing: the same payload.
	if r := post(t, url, "mm-1", "", "{ \"currency\": \"EUR\",\n \"amount\": 100 }"); r.status != 201 || !r.replayed {
		t.Errorf("reordered JSON: %d replayed=%v, want a replay", r.status, r.replayed)
	}
	if r := post(t, url, "mm-1", "", `{"amount":200,"currency":"EUR"}`); r.status != 422 {
		t.Errorf("other amount: %d, want 422", r.status)
	}
	if c.count() != 1 {
		t.Errorf("%d charges, want 1", c.count())
	}
}

func testRetention(t *testing.T, s idempotency.Store) {
	c := &charges{}
	url := serve(t, retaining{Store: s, retention: shortRetention}, c, idempotency.Options{})
	if r := post(t, url, "ret-1", "", `{"amount":1}`); r.status != 201 {
		t.Fatalf("first: %d %s, want 201", r.status, r.body)
	}
	time.Sleep(shortRetention + 200*time.Millisecond) // the client's retry comes later than retention
	if r := post(t, url, "ret-1", "", `{"amount":1}`); r.status != 201 || r.replayed {
		t.Errorf("after retention expired: %d replayed=%v, want a fresh 201", r.status, r.replayed)
	}
	if c.count() != 2 {
		t.Errorf("%d charges, want 2: a retention shorter than the retry window lets a retry charge again", c.count())
	}
}

// retaining is a store that keeps completed records for retention,
// whatever Retention the middleware completes with: a record outlived in
// a fraction of a second, while the middleware keeps its default
// LockTimeout and the StoreTimeout that follows from it. (A Retention that
// short in the middleware would force a StoreTimeout of a few tens of
// milliseconds, which a loaded machine misses.)
type retaining struct {
	idempotency.Store
	retention time.Duration
}

func (s retaining) Complete(ctx context.Context, p idempotency.CompleteParams) error {
	p.Retention = s.retention
	return s.Store.Complete(ctx, p)
}

// An expired claim is taken over by one owner, however many claim it at
// once: a takeover that does not check the expiry in the same atomic step
// lets several of them run the work.
func testExpiredTakeover(t *testing.T, s idempotency.Store) {
	ctx := context.Background()
	rec, err := s.Claim(ctx, idempotency.ClaimParams{Key: "exp-1", Fingerprint: "fp", Owner: "owner-dead", Lock: 100 * time.Millisecond})
	must(t, err)
	if rec != nil {
		t.Fatalf("first Claim returned %+v, want nil (claimed)", rec)
	}
	time.Sleep(300 * time.Millisecond) // its owner died: the claim expires
	const n = 16
	var winners, failed atomic.Int32
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			rec, err := s.Claim(ctx, idempotency.ClaimParams{Key: "exp-1", Fingerprint: "fp", Owner: fmt.Sprint("owner-", i), Lock: time.Minute})
			switch {
			case err != nil:
				failed.Add(1)
				t.Errorf("owner-%d: %v", i, err)
			case rec == nil:
				winners.Add(1)
			}
		}()
	}
	close(start)
	wg.Wait()
	if winners.Load() != 1 {
		t.Errorf("%d of %d concurrent claims took over the expired claim, want 1", winners.Load(), n)
	}
}

func testNotStored(t *testing.T, s idempotency.Store) {
	c := &charges{}
	c.fail.Store(1)
	url := serve(t, s, c, idempotency.Options{})
	if r := post(t, url, "ns-1", "", `{"amount":1}`); r.status != 503 {
		t.Fatalf("first: %d, want the handler's 503", r.status)
	}
	if r := post(t, url, "ns-1", "", `{"amount":1}`); r.status != 201 || r.replayed {
		t.Fatalf("retry: %d replayed=%v, want a fresh 201", r.status, r.replayed)
	}
	if c.count() != 1 {
		t.Errorf("%d charges, want 1", c.count())
	}
}

// crashed is a store as a process that died with its claims sees it: it
// can no longer extend or release them, and they lapse after lock in the
// store, whatever LockTimeout the middleware claims with (see lapsing).
// ended is told when the middleware, its handler done, completes or
// releases a claim.
type crashed struct {
	idempotency.Store
	lock  time.Duration
	ended chan string
}

func (s crashed) Claim(ctx context.Context, p idempotency.ClaimParams) (*idempotency.Record, error) {
	p.Lock = s.lock
	return s.Store.Claim(ctx, p)
}

func (crashed) Extend(context.Context, idempotency.ExtendParams) error { return nil }

func (s crashed) Release(context.Context, idempotency.ReleaseParams) error {
	s.ended <- "release"
	return nil
}

func (s crashed) Complete(ctx context.Context, p idempotency.CompleteParams) error {
	err := s.Store.Complete(ctx, p)
	s.ended <- fmt.Sprint("complete: ", err)
	return err
}

func testCrashedClaim(t *testing.T, s idempotency.Store) {
	// The first request's handler hangs in a process that died: its claim
	// is neither extended nor released, and lapses after lock. Its client
	// gives up once the handler runs.
	const lock = 500 * time.Millisecond
	stuck := &charges{block: make(chan struct{}), entered: make(chan struct{}, 1)}
	var unblock sync.Once
	release := func() { unblock.Do(func() { close(stuck.block) }) }
	ended := make(chan string, 1)
	url1 := serve(t, crashed{Store: s, lock: lock, ended: ended}, stuck, idempotency.Options{})
	t.Cleanup(release) // before the server's Close, which waits for the stuck handler, even when the test fails
	sent := time.Now() // the claim is made after this, so it holds the key until sent+lock at least
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		req, _ := http.NewRequestWithContext(ctx, "POST", url1+"/charges", strings.NewReader(`{"amount":9}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", "crash-1")
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	select {
	case <-stuck.entered:
	case <-time.After(time.Minute):
		t.Fatal("the first request's handler did not run within a minute")
	}
	cancel()
	<-done

	// Another instance sharing the store: 409 while the claim holds, then,
	// once it lapsed in the store, a fresh run. Whether the first post
	// still finds the claim depends on the machine's speed: it must when
	// it was answered before the claim could have lapsed.
	c := &charges{}
	url2 := serve(t, s, c, idempotency.Options{})
	r := post(t, url2, "crash-1", "", `{"amount":9}`)
	switch held := time.Since(sent) < lock; {
	case held && r.status != 409:
		t.Fatalf("while the claim is held: %d, want 409", r.status)
	case r.status != 409 && r.status != 201:
		t.Fatalf("around the claim's lapse: %d, want 409 or a fresh 201", r.status)
	}
	for deadline := time.Now().Add(time.Minute); r.status == 409 && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		r = post(t, url2, "crash-1", "", `{"amount":9}`)
	}
	fresh := r
	if fresh.status != 201 || fresh.replayed {
		t.Fatalf("after the claim lapsed: %d replayed=%v, want a fresh 201", fresh.status, fresh.replayed)
	}
	// The stuck request now finishes: its claim is gone, so it must not
	// overwrite or release the newer record.
	release()
	select {
	case how := <-ended:
		if strings.HasPrefix(how, "complete") && !strings.Contains(how, idempotency.ErrNotOwner.Error()) {
			t.Errorf("the old owner's %s, want ErrNotOwner: its claim was taken over", how)
		}
	case <-time.After(time.Minute):
		t.Fatal("the old owner's request did not end within a minute")
	}
	if r := post(t, url2, "crash-1", "", `{"amount":9}`); !r.replayed || r.body != fresh.body {
		t.Errorf("after the old owner finished: %d %s replayed=%v, want a replay of %s", r.status, r.body, r.replayed, fresh.body)
	}
}

func testScopes(t *testing.T, s idempotency.Store) {
	c := &charges{}
	url := serve(t, s, c, idempotency.Options{})
	a := post(t, url, "shared-key", "Bearer alice", `{"amount":1}`)
	b := post(t, url, "shared-key", "Bearer bob", `{"amount":1}`)
	if a.status != 201 || b.status != 201 || a.replayed || b.replayed || a.body == b.body {
		t.Fatalf("two callers, one key: %+v %+v, want two fresh charges", a, b)
	}
	if r := post(t, url, "shared-key", "Bearer alice", `{"amount":1}`); !r.replayed || r.body != a.body {
		t.Errorf("alice's retry got %+v, want her own response", r)
	}
	if c.count() != 2 {
		t.Errorf("%d charges, want 2", c.count())
	}
}

// testXKey: a POST carrying X-Idempotency-Key whose first response was
// lost is answered from the record when it is sent again.
func testXKey(t *testing.T, s idempotency.Store) {
	c := &charges{}
	url := serve(t, s, c, idempotency.Options{})
	send := func(header string) result {
		req, _ := http.NewRequest("POST", url+"/charges", strings.NewReader(`{"amount":3}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(header, "xkey-1")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return result{resp.StatusCode, string(b), resp.Header.Get(idempotency.HeaderReplayed) == "true"}
	}
	first := send("X-Idempotency-Key")
	again := send("X-Idempotency-Key")
	std := send("Idempotency-Key")
	if first.status != 201 || !again.replayed || !std.replayed || again.body != first.body {
		t.Fatalf("X-Idempotency-Key: %+v then %+v then (standard name) %+v, want one charge replayed", first, again, std)
	}
	if c.count() != 1 {
		t.Fatalf("%d charges, want 1", c.count())
	}
}

// testTrailers: a Set-Cookie sent as a trailer is not replayed, like one
// in the header; other trailers are.
func testTrailers(t *testing.T, s idempotency.Store) {
	m, err := idempotency.New(middlewareOptions(s, idempotency.Options{}))
	must(t, err)
	srv := httptest.NewServer(m.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, "ok")
		w.Header().Set(http.TrailerPrefix+"Set-Cookie", "session=alice")
		w.Header().Set(http.TrailerPrefix+"X-Checksum", "c1")
	})))
	t.Cleanup(srv.Close)
	send := func() *http.Response {
		req, _ := http.NewRequest("POST", srv.URL+"/charges", strings.NewReader(`{}`))
		req.Header.Set("Idempotency-Key", "trailer-1")
		resp, err := http.DefaultClient.Do(req)
		must(t, err)
		io.ReadAll(resp.Body) // trailers arrive after the body
		resp.Body.Close()
		return resp
	}
	first := send()
	if got := first.Trailer.Get("Set-Cookie"); got != "session=alice" {
		t.Fatalf("first response's Set-Cookie trailer = %q, want the handler's own", got)
	}
	again := send()
	if again.Header.Get(idempotency.HeaderReplayed) != "true" {
		t.Fatal("the second request was not a replay")
	}
	if got := again.Trailer.Get("Set-Cookie") + again.Header.Get("Set-Cookie"); got != "" {
		t.Fatalf("replay carries Set-Cookie %q: a replay must not hand out the first caller's session", got)
	}
	if got := again.Trailer.Get("X-Checksum"); got != "c1" {
		t.Fatalf("replay's X-Checksum trailer = %q, want c1", got)
	}
}

// testSlowHandler: a handler that runs one and a half times LockTimeout
// keeps its claim, extended on the way; a retry meanwhile gets 409, not a
// second run. The lock is twice the short one, so that a machine that
// stalls the claim's keeper for a second under load (a claim extended
// every LockTimeout/3) does not lapse it; the test still takes 4.5 s.
func testSlowHandler(t *testing.T, s idempotency.Store) {
	lock := 2 * shortLock
	c := &charges{delay: lock + lock/2}
	url := serve(t, s, c, idempotency.Options{LockTimeout: lock})
	first := make(chan result)
	go func() { first <- post(t, url, "slow-1", "", `{"amount":4}`) }()
	time.Sleep(lock) // the handler runs until 1.5 × lock
	if r := post(t, url, "slow-1", "", `{"amount":4}`); r.status != 409 {
		t.Fatalf("a retry while the slow handler runs: %d %s, want 409", r.status, r.body)
	}
	if r := <-first; r.status != 201 {
		t.Fatalf("the slow request: %d %s", r.status, r.body)
	}
	if r := post(t, url, "slow-1", "", `{"amount":4}`); !r.replayed {
		t.Fatalf("after it finished: %+v, want a replay", r)
	}
	if c.count() != 1 {
		t.Fatalf("%d charges, want 1", c.count())
	}
}

// lostReply takes the first claim and then reports an error, as a store
// whose reply was lost on the way back does.
type lostReply struct {
	idempotency.Store
	once sync.Once
}

var errLost = errors.New("storetest: reply lost")

func (l *lostReply) Claim(ctx context.Context, p idempotency.ClaimParams) (*idempotency.Record, error) {
	key, fp, owner, lock := p.Key, p.Fingerprint, p.Owner, p.Lock
	rec, err := l.Store.Claim(ctx, idempotency.ClaimParams{Key: key, Fingerprint: fp, Owner: owner, Lock: lock})
	lost := false
	l.once.Do(func() { lost = true })
	if lost && err == nil && rec == nil {
		return nil, errLost
	}
	return rec, err
}

// testLostClaimReply: the claim was taken but its reply lost: the request
// gets 503, and the key is free for its retry at once, not locked for
// LockTimeout with nothing running.
func testLostClaimReply(t *testing.T, s idempotency.Store) {
	c := &charges{}
	url := serve(t, &lostReply{Store: s}, c, idempotency.Options{LockTimeout: time.Minute})
	if r := post(t, url, "lost-1", "", `{"amount":5}`); r.status != 503 {
		t.Fatalf("first: %d, want 503", r.status)
	}
	// The claim is released in the background after the 503; until then a
	// retry is told 409 (in progress), which a client retries, as this one
	// does, a few milliseconds apart.
	r := post(t, url, "lost-1", "", `{"amount":5}`)
	for deadline := time.Now().Add(5 * time.Second); r.status == 409 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
		r = post(t, url, "lost-1", "", `{"amount":5}`)
	}
	if r.status != 201 || r.replayed {
		t.Fatalf("the retry: %d %s, want a fresh 201", r.status, r.body)
	}
	if c.count() != 1 {
		t.Fatalf("%d charges, want 1", c.count())
	}
}

// testRunner: eight consumers get the same message; the job runs once and
// all get its result. A failed run releases the key for the redelivery.
func testRunner(t *testing.T, s idempotency.Store) {
	r, err := idempotency.NewRunner(runnerOptions(s, idempotency.RunnerOptions{Kind: "storetest"}))
	must(t, err)
	var runs atomic.Int32
	job := func(ctx context.Context) ([]byte, error) {
		n := runs.Add(1)
		time.Sleep(100 * time.Millisecond)
		return []byte(fmt.Sprintf("receipt-%d", n)), nil
	}
	var wg sync.WaitGroup
	results := make([]string, 8)
	replays := atomic.Int32{}
	for i := range results {
		wg.Go(func() {
			out, replayed, err := r.Do(context.Background(), "order-42", job)
			if err != nil {
				t.Error(err)
			}
			if replayed {
				replays.Add(1)
			}
			results[i] = string(out)
		})
	}
	wg.Wait()
	if runs.Load() != 1 || replays.Load() != 7 {
		t.Fatalf("%d runs, %d replays for 8 deliveries; want 1 and 7", runs.Load(), replays.Load())
	}
	for _, got := range results {
		if got != "receipt-1" {
			t.Fatalf("results %q, want every one receipt-1", results)
		}
	}

	failing := errors.New("downstream down")
	_, _, err = r.Do(context.Background(), "order-43", func(context.Context) ([]byte, error) { return nil, failing })
	if !errors.Is(err, failing) {
		t.Fatalf("a failed run returned %v", err)
	}
	out, replayed, err := r.Do(context.Background(), "order-43", func(context.Context) ([]byte, error) { return []byte("ok"), nil })
	if err != nil || replayed || string(out) != "ok" {
		t.Fatalf("the redelivery after a failure: %q replayed=%v %v; want a fresh run", out, replayed, err)
	}
	// Another scope is another key space.
	other, _ := idempotency.NewRunner(runnerOptions(s, idempotency.RunnerOptions{Kind: "other"}))
	if _, replayed, _ := other.Do(context.Background(), "order-42", job); replayed {
		t.Fatal("a key of another scope was replayed")
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// Bench measures the middleware on s, in process (no sockets): a request
// with a new key (claim, handler, complete) and a replay of a stored one.
func Bench(b *testing.B, s idempotency.Store) {
	m, err := idempotency.New(idempotency.Options{Store: s})
	if err != nil {
		b.Fatal(err)
	}
	h := m.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, `{"id":1}`)
	}))
	do := func(key string) int {
		req := httptest.NewRequest("POST", "/charges", strings.NewReader(`{"amount":100}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", key)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		return w.Code
	}
	prefix := fmt.Sprintf("bench-%d-", time.Now().UnixNano())
	b.Run("new", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			i++
			if code := do(fmt.Sprint(prefix, i)); code != 201 {
				b.Fatalf("status %d", code)
			}
		}
	})
	b.Run("replay", func(b *testing.B) {
		do(prefix + "replayed")
		b.ReportAllocs()
		for b.Loop() {
			if code := do(prefix + "replayed"); code != 201 {
				b.Fatalf("status %d", code)
			}
		}
	})
}

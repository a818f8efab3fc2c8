package idempotency

// Tests of the middleware under store failures, with the memory store;
// storetest runs the store-level ones on every store.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// flakyStore fails an operation the given number of times, then works.
type flakyStore struct {
	Store
	mu    sync.Mutex
	fails map[string]int
}

func (s *flakyStore) fail(op string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fails[op] > 0 {
		s.fails[op]--
		return fmt.Errorf("%s: %w", op, errDown)
	}
	return nil
}

func (s *flakyStore) Complete(ctx context.Context, p CompleteParams) error {
	key, owner, resp, ret := p.Key, p.Owner, p.Response, p.Retention
	if err := s.fail("complete"); err != nil {
		return err
	}
	return s.Store.Complete(ctx, CompleteParams{Key: key, Owner: owner, Response: resp, Retention: ret})
}

func (s *flakyStore) Release(ctx context.Context, p ReleaseParams) error {
	key, owner := p.Key, p.Owner
	if err := s.fail("release"); err != nil {
		return err
	}
	return s.Store.Release(ctx, ReleaseParams{Key: key, Owner: owner})
}

func (s *flakyStore) Extend(ctx context.Context, p ExtendParams) error {
	key, owner, lock := p.Key, p.Owner, p.Lock
	if err := s.fail("extend"); err != nil {
		return err
	}
	return s.Store.Extend(ctx, ExtendParams{Key: key, Owner: owner, Lock: lock})
}

// A transient store error after the handler ran (a dead pooled
// connection) is retried: the response is recorded, the retry replays it.
func TestCompleteAndReleaseSurviveTransientErrors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &flakyStore{Store: mem(t), fails: map[string]int{"complete": 2, "release": 2}}
		var c counter
		h := newMiddleware(t, Options{Store: s, LockTimeout: time.Second, Logger: quiet}).Handler(c.handler(201))
		assert.Equal(t, 201, call(h, "POST", "k", `{}`, nil).Code)
		w := call(h, "POST", "k", `{}`, nil)
		assert.Equal(t, "true", w.Header().Get(HeaderReplayed), "Complete was retried until it worked")
		assert.Equal(t, 1, c.count())

		// A 503 releases the claim; the release is retried the same way.
		var f counter
		h = newMiddleware(t, Options{Store: s, LockTimeout: time.Minute, Logger: quiet}).Handler(f.handler(503))
		assert.Equal(t, 503, call(h, "POST", "r", `{}`, nil).Code)
		assert.Equal(t, 503, call(h, "POST", "r", `{}`, nil).Code, "released: the retry runs, not 409")
		assert.Equal(t, 2, f.count())
	})
}

// A handler that runs longer than LockTimeout keeps its claim; a
// retry meanwhile gets 409 with a Retry-After of the claim's remaining
// time, not a second run.
func TestSlowHandlerKeepsItsClaim(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var c counter
		h := newMiddleware(t, Options{LockTimeout: 3 * time.Second}).Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			time.Sleep(10 * time.Second)
			c.handler(201).ServeHTTP(w, r)
		}))
		first := make(chan int)
		go func() { first <- call(h, "POST", "k", `{}`, nil).Code }()
		for range 4 {
			time.Sleep(2 * time.Second)
			w := call(h, "POST", "k", `{}`, nil)
			require.Equal(t, 409, w.Code)
			assert.Contains(t, []string{"2", "3"}, w.Header().Get("Retry-After"), "the remaining lock, extended every second")
		}
		assert.Equal(t, 201, <-first)
		assert.Equal(t, 1, c.count())
	})
}

// A claim lost while the handler runs (the store expired it, another
// request took it) cancels the handler's context.
func TestLostClaimCancelsHandler(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := mem(t)
		var cause error
		h := newMiddleware(t, Options{Store: s, LockTimeout: 3 * time.Second, Logger: quiet}).Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			// Another owner takes the key, as after an expiry.
			s.mu.Lock()
			for _, e := range s.entries {
				e.owner = "someone else"
			}
			s.mu.Unlock()
			<-r.Context().Done()
			cause = context.Cause(r.Context())
			w.WriteHeader(503)
		}))
		call(h, "POST", "k", `{}`, nil)
		assert.ErrorIs(t, cause, ErrNotOwner)
	})
}

// Waiters have their own bound.
func TestWaitForResultBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newMiddleware(t, Options{WaitForResult: true, MaxWait: 2 * time.Second, LockTimeout: 10 * time.Second}).Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			time.Sleep(time.Minute)
		}))
		go call(h, "POST", "k", `{}`, nil)
		synctest.Wait()
		start := time.Now()
		w := call(h, "POST", "k", `{}`, nil)
		assert.Equal(t, 409, w.Code)
		assert.LessOrEqual(t, time.Since(start), 2*time.Second)
		assert.NotEmpty(t, w.Header().Get("Retry-After"))
		time.Sleep(time.Minute)
	})
}

// Set-Cookie is not replayed; the header policy is configurable.
func TestReplayHeaderPolicy(t *testing.T) {
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Set-Cookie", "session=alice")
		w.Header().Set("Location", "/charges/1")
		w.Header().Set("X-Internal", "x")
		w.WriteHeader(201)
	})
	h := newMiddleware(t, Options{}).Handler(handler)
	first := call(h, "POST", "k", `{}`, nil)
	assert.Equal(t, "session=alice", first.Header().Get("Set-Cookie"), "the first response is the handler's own")
	replay := call(h, "POST", "k", `{}`, nil)
	assert.Equal(t, "true", replay.Header().Get(HeaderReplayed))
	assert.Empty(t, replay.Header().Get("Set-Cookie"), "a replay does not hand out the session")
	assert.Equal(t, "/charges/1", replay.Header().Get("Location"))

	only := newMiddleware(t, Options{ReplayHeader: func(name string) bool { return name == "Location" }}).Handler(handler)
	call(only, "POST", "k", `{}`, nil)
	replay = call(only, "POST", "k", `{}`, nil)
	assert.Equal(t, "/charges/1", replay.Header().Get("Location"))
	assert.Empty(t, replay.Header().Get("X-Internal"))
}

// A hook fingerprints a subset of the payload.
func TestFingerprintHook(t *testing.T) {
	var c counter
	h := newMiddleware(t, Options{Fingerprint: func(r *http.Request, body []byte) ([]byte, error) {
		// Ignore everything but the amount field's position: a toy rule.
		if !bytes.Contains(body, []byte(`"amount"`)) {
			return nil, errors.New("no amount")
		}
		i := bytes.Index(body, []byte(`"amount"`))
		return body[i:], nil
	}}).Handler(c.handler(201))
	assert.Equal(t, 201, call(h, "POST", "k", `{"nonce":1,"amount":5}`, nil).Code)
	assert.Equal(t, "true", call(h, "POST", "k", `{"nonce":2,"amount":5}`, nil).Header().Get(HeaderReplayed))
	assert.Equal(t, 422, call(h, "POST", "k", `{"nonce":2,"amount":6}`, nil).Code)
	assert.Equal(t, 400, call(h, "POST", "k2", `{}`, nil).Code)
	assert.Equal(t, 1, c.count())
}

// The server honours X-Idempotency-Key, and refuses two different
// keys.
func TestXIdempotencyKey(t *testing.T) {
	var c counter
	h := newMiddleware(t, Options{}).Handler(c.handler(201))
	x := func(v string) http.Header { return http.Header{"X-Idempotency-Key": {v}} }
	assert.Equal(t, 201, call(h, "POST", "", `{}`, x("k")).Code)
	assert.Equal(t, "true", call(h, "POST", "", `{}`, x("k")).Header().Get(HeaderReplayed))
	assert.Equal(t, "true", call(h, "POST", "k", `{}`, nil).Header().Get(HeaderReplayed), "one key under either name")
	w := call(h, "POST", "k", `{}`, x("other"))
	assert.Equal(t, 400, w.Code)
	assert.Contains(t, w.Body.String(), "different keys")
	assert.Equal(t, 1, c.count())
}

// Released runs have their own result; a caller without identity
// gets 401 before 400; errors are logged without a Logger configured.
func TestSignals(t *testing.T) {
	reg := prometheus.NewRegistry()
	metrics, err := NewMetrics(reg)
	require.NoError(t, err)
	var c counter
	fail := true
	h := newMiddleware(t, Options{Hooks: []Hook{metrics}}).Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if fail {
			fail = false
			c.handler(503).ServeHTTP(w, r)
			return
		}
		c.handler(201).ServeHTTP(w, r)
	}))
	call(h, "POST", "k", `{}`, nil)
	call(h, "POST", "k", `{}`, nil)
	assert.Equal(t, 1.0, testutil.ToFloat64(metrics.requests.WithLabelValues(ResultReleased.String())))
	assert.Equal(t, 1.0, testutil.ToFloat64(metrics.requests.WithLabelValues(ResultNew.String())), "new counts stored runs only")

	noScope := func(*http.Request) (string, error) { return "", errors.New("no tenant") }
	strict := newMiddleware(t, Options{RequireKey: true, Scope: noScope, Hooks: []Hook{metrics}}).Handler(c.handler(201))
	assert.Equal(t, 401, call(strict, "POST", "", `{}`, nil).Code, "no identity: 401 before 'missing key'")
	assert.Equal(t, 1.0, testutil.ToFloat64(metrics.requests.WithLabelValues(ResultUnauthorized.String())))

	var logs bytes.Buffer
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&logs, nil)))
	defer slog.SetDefault(prev)
	down := newMiddleware(t, Options{Store: failingStore{mem(t), "claim"}}).Handler(c.handler(201))
	assert.Equal(t, 503, call(down, "POST", "k", `{}`, nil).Code)
	assert.Contains(t, logs.String(), "idempotency: store claim failed", "a nil Logger is slog.Default: a 503 is never silent")
}

// A full memory store refuses in constant time: the refusal does
// not scan its entries.
func BenchmarkMemoryStoreFullRefusal(b *testing.B) {
	ctx := context.Background()
	for _, n := range []int{1_000, 100_000} {
		b.Run(fmt.Sprintf("entries=%d", n), func(b *testing.B) {
			s, _ := NewMemoryStore(n)
			for i := range n {
				s.Claim(ctx, ClaimParams{Key: fmt.Sprint("held-", i), Fingerprint: "fp", Owner: "o", Lock: time.Hour})
			}
			b.ResetTimer()
			for b.Loop() {
				if _, err := s.Claim(ctx, ClaimParams{Key: "new", Fingerprint: "fp", Owner: "o", Lock: time.Hour}); !errors.Is(err, ErrStoreFull) {
					b.Fatal(err)
				}
			}
		})
	}
}

// Completed records evicted before their retention are counted.
func TestMemoryStoreEvictedEarly(t *testing.T) {
	reg := prometheus.NewRegistry()
	metrics, _ := NewMetrics(reg)
	s := mem(t, 2)
	var c counter
	h := newMiddleware(t, Options{Store: s, Hooks: []Hook{metrics}}).Handler(c.handler(201))
	for i := range 5 {
		call(h, "POST", fmt.Sprint("k", i), `{}`, nil)
	}
	assert.Equal(t, uint64(3), s.EvictedEarly())
	assert.Equal(t, 3.0, testutil.ToFloat64(metrics.evictedEarly))
	call(h, "POST", "k0", `{}`, nil)
	assert.Equal(t, 6, c.count(), "k0 was evicted early: its retry ran the handler again")
}

// The memory store's refusal is O(1) and its claim of an expired key takes
// the expired claim's place.
func TestMemoryStoreEvictsExpiredClaimsFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		s := mem(t, 2)
		_, _ = s.Claim(ctx, ClaimParams{Key: "short", Fingerprint: "fp", Owner: "o", Lock: time.Second})
		_, _ = s.Claim(ctx, ClaimParams{Key: "long", Fingerprint: "fp", Owner: "o", Lock: time.Hour})
		_, err := s.Claim(ctx, ClaimParams{Key: "new", Fingerprint: "fp", Owner: "o", Lock: time.Hour})
		assert.ErrorIs(t, err, ErrStoreFull)
		time.Sleep(2 * time.Second)
		rec, err := s.Claim(ctx, ClaimParams{Key: "new", Fingerprint: "fp", Owner: "o", Lock: time.Hour})
		require.NoError(t, err)
		assert.Nil(t, rec)
		rec, _ = s.Claim(ctx, ClaimParams{Key: "long", Fingerprint: "fp", Owner: "o2", Lock: time.Hour})
		assert.NotNil(t, rec, "the live claim was kept")
	})
}

var quiet = slog.New(slog.DiscardHandler)

// hangingStore's first Complete hangs until its context ends, as on a
// connection whose peer stopped answering.
type hangingStore struct {
	Store
	mu    sync.Mutex
	tries []time.Duration // how long each Complete took
}

func (s *hangingStore) Complete(ctx context.Context, p CompleteParams) error {
	key, owner, resp, ret := p.Key, p.Owner, p.Response, p.Retention
	start := time.Now()
	s.mu.Lock()
	first := len(s.tries) == 0
	s.mu.Unlock()
	var err error
	if first {
		<-ctx.Done()
		err = ctx.Err()
	} else {
		err = s.Store.Complete(ctx, CompleteParams{Key: key, Owner: owner, Response: resp, Retention: ret})
	}
	s.mu.Lock()
	s.tries = append(s.tries, time.Since(start))
	s.mu.Unlock()
	return err
}

// A store call that hangs after the handler ran is cancelled after
// StoreTimeout and tried again: the response is recorded and the client
// gets it.
func TestHungCompleteIsBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &hangingStore{Store: mem(t)}
		var c counter
		m := newMiddleware(t, Options{Store: s, Logger: quiet})
		h := m.Handler(c.handler(201))
		assert.Equal(t, 201, call(h, "POST", "k", `{}`, nil).Code)
		require.Len(t, s.tries, 2, "the hung try was cancelled and the next one recorded the response")
		assert.Equal(t, DefaultStoreTimeout, s.tries[0])
		assert.Equal(t, "true", call(h, "POST", "k", `{}`, nil).Header().Get(HeaderReplayed))
		assert.Equal(t, 1, c.count())
	})
}

// A claim is extended every LockTimeout/3 while its handler runs, and
// not once after it ends.
func TestClaimExtendedWhileTheHandlerRuns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &countingStore{Store: mem(t)}
		const lock = 3 * time.Second
		m := newMiddleware(t, Options{Store: s, LockTimeout: lock, Logger: quiet})
		h := m.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			time.Sleep(3*lock + lock/6) // through nine extensions' times and half of the next
			w.WriteHeader(http.StatusCreated)
		}))
		assert.Equal(t, 201, call(h, "POST", "k", `{}`, nil).Code)
		assert.Equal(t, int32(9), s.extends.Load())
		time.Sleep(10 * lock)
		assert.Equal(t, int32(9), s.extends.Load(), "no extension after the handler ended")
	})
}

type countingStore struct {
	Store
	extends atomic.Int32
}

func (s *countingStore) Extend(ctx context.Context, p ExtendParams) error {
	s.extends.Add(1)
	return s.Store.Extend(ctx, p)
}

// stalledStore stops answering (every call hangs until its context ends)
// once stalled is set: a partition the process cannot see.
type stalledStore struct {
	Store
	stalled atomic.Bool
	claims  atomic.Int32 // Claims sent while stalled
}

func (s *stalledStore) hang(ctx context.Context) error {
	<-ctx.Done()
	return ctx.Err()
}

func (s *stalledStore) Claim(ctx context.Context, p ClaimParams) (*Record, error) {
	key, fp, owner, lock := p.Key, p.Fingerprint, p.Owner, p.Lock
	if s.stalled.Load() {
		s.claims.Add(1)
		return nil, s.hang(ctx)
	}
	return s.Store.Claim(ctx, ClaimParams{Key: key, Fingerprint: fp, Owner: owner, Lock: lock})
}

func (s *stalledStore) Extend(ctx context.Context, p ExtendParams) error {
	key, owner, lock := p.Key, p.Owner, p.Lock
	if s.stalled.Load() {
		return s.hang(ctx)
	}
	return s.Store.Extend(ctx, ExtendParams{Key: key, Owner: owner, Lock: lock})
}

func (s *stalledStore) Release(ctx context.Context, p ReleaseParams) error {
	key, owner := p.Key, p.Owner
	if s.stalled.Load() {
		return s.hang(ctx)
	}
	return s.Store.Release(ctx, ReleaseParams{Key: key, Owner: owner})
}

// A handler whose claim can no longer be shown to be held is told to stop
// before the claim can lapse: its context is cancelled with ErrClaimLapsed
// although the store never answered ErrNotOwner.
func TestStalledExtensionsCancelTheHandler(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &stalledStore{Store: mem(t)}
		const lock = 3 * time.Second
		m := newMiddleware(t, Options{Store: s, LockTimeout: lock, Logger: quiet})
		var cause error
		var stoppedAfter time.Duration
		start := time.Now()
		h := m.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			time.Sleep(500 * time.Millisecond)
			s.stalled.Store(true) // the partition begins while the handler runs
			select {
			case <-r.Context().Done():
				cause, stoppedAfter = context.Cause(r.Context()), time.Since(start)
				w.WriteHeader(http.StatusServiceUnavailable)
			case <-time.After(time.Minute):
				w.WriteHeader(http.StatusCreated) // the charge a partitioned handler must not make
			}
		}))
		assert.Equal(t, 503, call(h, "POST", "k", `{}`, nil).Code)
		require.ErrorIs(t, cause, ErrClaimLapsed)
		// The last extension that succeeded was sent at 1 s (lock/3), so the
		// claim is held until 4 s; the handler stops before then.
		assert.Less(t, stoppedAfter, time.Second+lock, "stopped before the claim could lapse")
		assert.Greater(t, stoppedAfter, lock/2, "not before the extensions had a fair chance")
		time.Sleep(2 * storeDeadline) // the release after the 503 gives up meanwhile
	})
}

// A store that stalls before the claim answers 503 within StoreTimeout,
// and the release sent after the failed claim does not delay that answer.
func TestStalledClaimIsBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &stalledStore{Store: mem(t)}
		s.stalled.Store(true)
		var c counter
		m := newMiddleware(t, Options{Store: s, StoreTimeout: 500 * time.Millisecond, Logger: quiet})
		start := time.Now()
		rec := call(m.Handler(c.handler(201)), "POST", "k", `{}`, nil)
		took := time.Since(start)
		assert.Equal(t, 503, rec.Code)
		assert.Equal(t, 500*time.Millisecond, took, "the claim's bound, and no more")
		assert.Equal(t, 0, c.count(), "the handler never runs unprotected")
		time.Sleep(time.Second) // the background release gives up meanwhile
	})
}

// StoreTimeout is checked with the other times.
func TestStoreTimeoutValidated(t *testing.T) {
	_, err := New(Options{StoreTimeout: -time.Second})
	assert.ErrorContains(t, err, "StoreTimeout")
	_, err = New(Options{LockTimeout: 3 * time.Second, StoreTimeout: 2 * time.Second})
	assert.ErrorContains(t, err, "LockTimeout/3")
	m, err := New(Options{LockTimeout: 600 * time.Millisecond})
	require.NoError(t, err)
	assert.Equal(t, 200*time.Millisecond, m.timeout, "a short lock shortens the default")
	_, err = NewRunner(RunnerOptions{StoreTimeout: -1})
	assert.ErrorContains(t, err, "StoreTimeout")
}

// The Runner's work is told to stop the same way when its claim can no
// longer be shown to be held.
func TestRunnerStopsWhenItsClaimLapses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &stalledStore{Store: mem(t)}
		r, err := NewRunner(RunnerOptions{Store: s, LockTimeout: 3 * time.Second, Logger: quiet})
		require.NoError(t, err)
		_, _, err = r.Do(context.Background(), "order-1", func(ctx context.Context) ([]byte, error) {
			s.stalled.Store(true)
			select {
			case <-ctx.Done():
				return nil, context.Cause(ctx)
			case <-time.After(time.Minute):
				return []byte("charged"), nil
			}
		})
		require.ErrorIs(t, err, ErrClaimLapsed)
		time.Sleep(2 * storeDeadline)
	})
}

// lateStore applies each extension at once but answers it late, then
// stalls: a store whose replies are slow before the partition.
type lateStore struct {
	stalledStore
	late time.Duration
}

func (s *lateStore) Extend(ctx context.Context, p ExtendParams) error {
	if s.stalled.Load() {
		return s.hang(ctx)
	}
	err := s.Store.Extend(ctx, p)
	time.Sleep(s.late) // the reply is on its way
	s.stalled.Store(true)
	return err
}

// The exact moment the work is told to stop: the send of the last
// extension that succeeded, plus LockTimeout, less LockTimeout/6. The
// store's clock started counting at its receipt, before the late reply,
// so the reply's time would overstate what is held.
func TestClaimLapseMarginIsExact(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const lock = 6 * time.Second
		s := &lateStore{stalledStore: stalledStore{Store: mem(t)}, late: 900 * time.Millisecond}
		r, err := NewRunner(RunnerOptions{Store: s, LockTimeout: lock, Logger: quiet})
		require.NoError(t, err)
		start := time.Now()
		var stopped time.Duration
		_, _, err = r.Do(context.Background(), "order-1", func(ctx context.Context) ([]byte, error) {
			select {
			case <-ctx.Done():
				stopped = time.Since(start)
				return nil, context.Cause(ctx)
			case <-time.After(time.Minute):
				return []byte("charged"), nil
			}
		})
		require.ErrorIs(t, err, ErrClaimLapsed)
		// The one extension that succeeded was sent at lock/3 (2 s): the
		// claim is known held until 8 s, and the work stops at 7 s.
		assert.Equal(t, lock/3+lock-lock/6, stopped)
		time.Sleep(2 * storeDeadline)
	})
}

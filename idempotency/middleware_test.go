package idempotency

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// call sends one request through h and returns the recorded response.
func call(h http.Handler, method, key, body string, header http.Header) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, "/charges", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	return w
}

type counter struct {
	mu sync.Mutex
	n  int
}

func (c *counter) handler(status int) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.mu.Lock()
		c.n++
		c.mu.Unlock()
		w.Header().Set("X-Charge", "1")
		w.Header().Set("Connection", "close")
		w.Header().Set("Date", "Mon, 02 Jan 2006 15:04:05 GMT")
		w.WriteHeader(status)
		io.WriteString(w, `{"ok":true}`)
	})
}

func (c *counter) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

func mem(t testing.TB, max ...int) *MemoryStore {
	n := 0
	if len(max) > 0 {
		n = max[0]
	}
	s, err := NewMemoryStore(n)
	require.NoError(t, err)
	return s
}

func newMiddleware(t *testing.T, opts Options) *Middleware {
	m, err := New(opts)
	require.NoError(t, err)
	return m
}

func TestMethodsAndKeys(t *testing.T) {
	reg := prometheus.NewRegistry()
	metrics, err := NewMetrics(reg)
	require.NoError(t, err)
	var c counter
	h := newMiddleware(t, Options{Hooks: []Hook{metrics}}).Handler(c.handler(201))

	for _, m := range []string{"GET", "PUT", "DELETE"} {
		call(h, m, "k", "", nil)
		call(h, m, "k", "", nil)
	}
	assert.Equal(t, 6, c.count(), "other methods pass through untouched")

	w := call(h, "POST", "", `{}`, nil)
	assert.Equal(t, 201, w.Code, "no key: passes through by default")
	w = call(h, "POST", `"bad`, `{}`, nil)
	assert.Equal(t, 400, w.Code)
	assert.Equal(t, "application/problem+json", w.Header().Get("Content-Type"))
	assert.Contains(t, w.Body.String(), "unterminated string")
	w = call(h, "POST", "", `{}`, http.Header{"Idempotency-Key": {"a", "b"}})
	assert.Equal(t, 400, w.Code)

	strict := newMiddleware(t, Options{RequireKey: true, Methods: []string{"POST", "PUT"}}).Handler(c.handler(201))
	before := c.count()
	assert.Equal(t, 400, call(strict, "PUT", "", `{}`, nil).Code)
	assert.Equal(t, 400, call(strict, "POST", "", `{}`, nil).Code)
	assert.Equal(t, 201, call(strict, "PATCH", "", `{}`, nil).Code, "PATCH is not in Methods: untouched")
	assert.Equal(t, before+1, c.count())

	assert.Equal(t, 1.0, testutil.ToFloat64(metrics.requests.WithLabelValues(ResultMissingKey.String())))
	assert.Equal(t, 2.0, testutil.ToFloat64(metrics.requests.WithLabelValues(ResultInvalidKey.String())))
}

func TestReplayHeaders(t *testing.T) {
	var c counter
	h := newMiddleware(t, Options{}).Handler(c.handler(201))
	first := call(h, "POST", "k1", `{"a":1}`, nil)
	second := call(h, "POST", "k1", `{"a":1}`, nil)
	assert.Equal(t, 1, c.count())
	assert.Equal(t, 201, second.Code)
	assert.Equal(t, first.Body.String(), second.Body.String())
	assert.Equal(t, "true", second.Header().Get(HeaderReplayed))
	assert.Empty(t, first.Header().Get(HeaderReplayed))
	assert.Equal(t, "1", second.Header().Get("X-Charge"))
	assert.Empty(t, second.Header().Get("Connection"), "hop-by-hop fields are not replayed")
	assert.Empty(t, second.Header().Get("Date"), "Date is not replayed")
}

// A stored response is shared by every replay from the memory store: a
// layer above that adds to a replayed field, from many requests at once,
// neither races nor changes what the next replay gets. Run with -race.
func TestReplaysShareNothingWritable(t *testing.T) {
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Add("Vary", "Accept")
		w.Header().Add("Vary", "Origin")
		w.Header().Add("Vary", "Accept-Encoding") // three values in an array of four: room to grow
		w.WriteHeader(201)
	})
	inner := newMiddleware(t, Options{}).Handler(handler)
	outer := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		inner.ServeHTTP(w, r)
		w.Header().Add("Vary", "Cookie") // after the fact, as a careless layer might
	})
	call(outer, "POST", "k", `{}`, nil)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 20 {
				call(outer, "POST", "k", `{}`, nil)
			}
		})
	}
	wg.Wait()
	w := call(inner, "POST", "k", `{}`, nil)
	assert.Equal(t, []string{"Accept", "Origin", "Accept-Encoding"}, w.Header()["Vary"])
}

func TestWhatIsStored(t *testing.T) {
	for _, tc := range []struct {
		status int
		stored bool
	}{
		{200, true}, {201, true}, {204, true}, {400, true}, {404, true}, {422, true},
		{408, false}, {409, false}, {429, false}, {500, false}, {502, false}, {503, false}, {302, false},
	} {
		var c counter
		h := newMiddleware(t, Options{}).Handler(c.handler(tc.status))
		call(h, "POST", "k", `{}`, nil)
		w := call(h, "POST", "k", `{}`, nil)
		if tc.stored {
			assert.Equal(t, 1, c.count(), "%d is final: replayed", tc.status)
			assert.Equal(t, "true", w.Header().Get(HeaderReplayed))
		} else {
			assert.Equal(t, 2, c.count(), "%d is not final: the retry runs again", tc.status)
		}
	}
}

func TestPanicReleasesAndRepanics(t *testing.T) {
	var c counter
	panicky := true
	h := newMiddleware(t, Options{}).Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if panicky {
			panic("boom")
		}
		c.handler(201).ServeHTTP(w, r)
	}))
	assert.PanicsWithValue(t, "boom", func() { call(h, "POST", "k", `{}`, nil) })
	panicky = false
	w := call(h, "POST", "k", `{}`, nil)
	assert.Equal(t, 201, w.Code)
	assert.Empty(t, w.Header().Get(HeaderReplayed))
}

// failingStore fails the operations named in fail.
type failingStore struct {
	*MemoryStore
	fail string
}

var errDown = errors.New("store down")

func (s failingStore) Claim(ctx context.Context, p ClaimParams) (*Record, error) {
	key, fp, owner, lock := p.Key, p.Fingerprint, p.Owner, p.Lock
	if s.fail == "claim" {
		return nil, errDown
	}
	return s.MemoryStore.Claim(ctx, ClaimParams{Key: key, Fingerprint: fp, Owner: owner, Lock: lock})
}

func (s failingStore) Complete(ctx context.Context, p CompleteParams) error {
	key, owner, resp, ret := p.Key, p.Owner, p.Response, p.Retention
	if s.fail == "complete" {
		return errDown
	}
	return s.MemoryStore.Complete(ctx, CompleteParams{Key: key, Owner: owner, Response: resp, Retention: ret})
}

func TestStoreErrorsFailClosed(t *testing.T) {
	synctest.Test(t, testStoreErrorsFailClosed)
}

func testStoreErrorsFailClosed(t *testing.T) {
	reg := prometheus.NewRegistry()
	metrics, _ := NewMetrics(reg)
	var c counter
	h := newMiddleware(t, Options{Store: failingStore{mem(t), "claim"}, Hooks: []Hook{metrics}}).Handler(c.handler(201))
	w := call(h, "POST", "k", `{}`, nil)
	assert.Equal(t, 503, w.Code)
	assert.Equal(t, "1", w.Header().Get("Retry-After"))
	assert.Equal(t, 0, c.count(), "the handler never runs unprotected")
	assert.Equal(t, 1.0, testutil.ToFloat64(metrics.requests.WithLabelValues(ResultStoreError.String())))

	// Complete keeps failing after the effect (past the retries): the
	// client still gets its answer, and the claim stays, so a retry within
	// LockTimeout gets 409, not a second effect.
	reg2 := prometheus.NewRegistry()
	metrics2, _ := NewMetrics(reg2)
	h = newMiddleware(t, Options{Store: failingStore{mem(t), "complete"}, Hooks: []Hook{metrics2}}).Handler(c.handler(201))
	assert.Equal(t, 201, call(h, "POST", "k", `{}`, nil).Code)
	assert.Equal(t, 409, call(h, "POST", "k", `{}`, nil).Code)
	assert.Equal(t, 1, c.count())
	total := 0.0
	for _, c := range metrics2.byResult {
		total += testutil.ToFloat64(c)
	}
	assert.Equal(t, 2.0, total, "one result per request")
	assert.Equal(t, 1.0, testutil.ToFloat64(metrics2.requests.WithLabelValues(ResultStoreError.String())))
	assert.Equal(t, 0.0, testutil.ToFloat64(metrics2.requests.WithLabelValues(ResultNew.String())))
}

func TestMismatchAndInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		var c counter
		h := newMiddleware(t, Options{}).Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			<-release
			c.handler(201).ServeHTTP(w, r)
		}))
		done := make(chan *httptest.ResponseRecorder)
		go func() { done <- call(h, "POST", "k", `{"a":1}`, nil) }()
		synctest.Wait()
		w := call(h, "POST", "k", `{"a":1}`, nil)
		assert.Equal(t, 409, w.Code)
		assert.Equal(t, "10", w.Header().Get("Retry-After"), "how long the claim may still hold: LockTimeout")
		assert.Equal(t, 422, call(h, "POST", "k", `{"a":2}`, nil).Code, "a mismatch wins over in-flight")
		close(release)
		assert.Equal(t, 201, (<-done).Code)
		assert.Equal(t, 1, c.count())
	})
}

func TestWaitForResult(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var c counter
		h := newMiddleware(t, Options{WaitForResult: true}).Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			time.Sleep(3 * time.Second)
			c.handler(201).ServeHTTP(w, r)
		}))
		first := make(chan *httptest.ResponseRecorder)
		go func() { first <- call(h, "POST", "k", `{}`, nil) }()
		synctest.Wait()
		start := time.Now()
		w := call(h, "POST", "k", `{}`, nil)
		assert.Equal(t, 201, w.Code, "waited for the result")
		assert.Equal(t, "true", w.Header().Get(HeaderReplayed))
		assert.Less(t, time.Since(start), 4*time.Second)
		<-first
		assert.Equal(t, 1, c.count())

		// Bounded by the waiter's context.
		go func() { first <- call(h, "POST", "k2", `{}`, nil) }()
		synctest.Wait()
		ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
		defer cancel()
		req := httptest.NewRequest("POST", "/charges", strings.NewReader(`{}`)).WithContext(ctx)
		req.Header.Set("Idempotency-Key", "k2")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		assert.Equal(t, 409, rec.Code)
		assert.Contains(t, rec.Body.String(), "gave up waiting", "the waiter's context ended the wait")
		<-first
	})
}

func TestLimits(t *testing.T) {
	var c counter
	h := newMiddleware(t, Options{MaxRequestBytes: 10}).Handler(c.handler(201))
	assert.Equal(t, 413, call(h, "POST", "k", strings.Repeat("x", 11), nil).Code)
	assert.Equal(t, 0, c.count())

	big := strings.Repeat("y", 100)
	bigHandler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.mu.Lock()
		c.n++
		c.mu.Unlock()
		w.WriteHeader(200)
		for range 10 {
			io.WriteString(w, big)
		}
	})
	h = newMiddleware(t, Options{MaxResponseBytes: 300}).Handler(bigHandler)
	w := call(h, "POST", "k", `{}`, nil)
	assert.Equal(t, 200, w.Code)
	assert.Equal(t, 1000, w.Body.Len(), "a large response is streamed whole")
	w = call(h, "POST", "k", `{}`, nil)
	assert.Equal(t, 500, w.Code, "and its replay explains it was not kept")
	assert.Contains(t, w.Body.String(), "too large")
	assert.Equal(t, 1, c.count(), "the handler ran once: not for the 413, not for the replay")
}

func TestNewValidates(t *testing.T) {
	for _, o := range []Options{{Retention: -1}, {LockTimeout: -1}, {MaxWait: -1}, {MaxRequestBytes: -1}, {MaxResponseBytes: -1}, {Transactional: true},
		{Retention: time.Second, LockTimeout: time.Minute}, {Retention: time.Second}} {
		_, err := New(o)
		assert.Error(t, err, "%+v", o)
	}
	_, err := New(Options{Retention: time.Second, LockTimeout: time.Minute})
	assert.ErrorContains(t, err, "Retention 1s must exceed LockTimeout 1m0s")
	_, err = NewMetrics(nil)
	assert.Error(t, err)
	_, err = NewMemoryStore(-1)
	assert.ErrorContains(t, err, "maxEntries -1 is negative")
	reg := prometheus.NewRegistry()
	m1, err := NewMetrics(reg)
	require.NoError(t, err)
	m2, err := NewMetrics(reg)
	require.NoError(t, err)
	m1.OnEvent(context.Background(), Event{Kind: EventResult, Result: ResultNew})
	m2.OnEvent(context.Background(), Event{Kind: EventResult, Result: ResultNew})
	assert.Equal(t, 2.0, testutil.ToFloat64(m1.requests.WithLabelValues(ResultNew.String())))
}

func TestScopeError(t *testing.T) {
	var c counter
	h := newMiddleware(t, Options{Scope: func(*http.Request) (string, error) { return "", errors.New("no tenant") }}).Handler(c.handler(201))
	assert.Equal(t, 401, call(h, "POST", "k", `{}`, nil).Code)
	assert.Equal(t, 0, c.count())
}

func TestMemoryStoreBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		s := mem(t, 3)
		for _, k := range []string{"a", "b", "c"} {
			_, err := s.Claim(ctx, ClaimParams{Key: k, Fingerprint: "fp", Owner: "o", Lock: time.Minute})
			require.NoError(t, err)
		}
		_, err := s.Claim(ctx, ClaimParams{Key: "d", Fingerprint: "fp", Owner: "o", Lock: time.Minute})
		assert.ErrorIs(t, err, ErrStoreFull, "three live in-flight claims are never evicted")

		require.NoError(t, s.Complete(ctx, CompleteParams{Key: "b", Owner: "o", Response: &Response{Status: 201}, Retention: time.Hour}))
		rec, err := s.Claim(ctx, ClaimParams{Key: "d", Fingerprint: "fp", Owner: "o", Lock: time.Minute})
		require.NoError(t, err)
		assert.Nil(t, rec)
		assert.Equal(t, 3, s.Len())
		rec, _ = s.Claim(ctx, ClaimParams{Key: "b", Fingerprint: "fp", Owner: "o2", Lock: time.Minute})
		assert.Nil(t, rec, "the completed record was the one evicted")

		time.Sleep(time.Minute) // all claims expire
		for i := range 10 {
			_, err := s.Claim(ctx, ClaimParams{Key: string(rune('e' + i)), Fingerprint: "fp", Owner: "o", Lock: time.Minute})
			require.NoError(t, err)
			time.Sleep(time.Minute)
		}
		assert.LessOrEqual(t, s.Len(), 3, "a key flood stays within MaxEntries")
	})
}

func TestMemoryStoreTTL(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		s := mem(t)
		_, _ = s.Claim(ctx, ClaimParams{Key: "k", Fingerprint: "fp", Owner: "o", Lock: time.Minute})
		require.NoError(t, s.Complete(ctx, CompleteParams{Key: "k", Owner: "o", Response: &Response{Status: 201}, Retention: 24 * time.Hour}))
		time.Sleep(24*time.Hour - time.Second)
		rec, _ := s.Claim(ctx, ClaimParams{Key: "k", Fingerprint: "fp", Owner: "o2", Lock: time.Minute})
		require.NotNil(t, rec)
		assert.Equal(t, 201, rec.Response.Status)
		time.Sleep(time.Second)
		rec, _ = s.Claim(ctx, ClaimParams{Key: "k", Fingerprint: "fp", Owner: "o2", Lock: time.Minute})
		assert.Nil(t, rec, "expired exactly at retention")
	})
}

// Statuses that ask for the request again later are not stored as its
// result: a replay would repeat them forever.
func TestRetryLaterStatusesAreNotStored(t *testing.T) {
	for _, code := range []int{408, 409, 425, 429, 500, 503} {
		n := 0
		h := newMiddleware(t, Options{}).Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			n++
			if n == 1 {
				w.WriteHeader(code)
				return
			}
			w.WriteHeader(201)
		}))
		assert.Equal(t, code, call(h, "POST", "k", `{}`, nil).Code)
		second := call(h, "POST", "k", `{}`, nil)
		assert.Equal(t, 201, second.Code, "after %d the retry runs the handler", code)
		assert.Empty(t, second.Header().Get(HeaderReplayed))
	}
}

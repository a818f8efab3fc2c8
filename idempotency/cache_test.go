package idempotency

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// claimCounter counts the Claims that reach the store.
type claimCounter struct {
	Store
	claims atomic.Int32
}

func (c *claimCounter) Claim(ctx context.Context, p ClaimParams) (*Record, error) {
	c.claims.Add(1)
	return c.Store.Claim(ctx, p)
}

// A replay of a record this process completed is answered from memory:
// the store is not asked, the answer is the store's, the metrics and the
// hooks say so. The fingerprint and the scope are checked as the store
// checks them.
func TestReplayCache(t *testing.T) {
	store := &claimCounter{Store: mem(t)}
	reg := prometheus.NewRegistry()
	metrics, err := NewMetrics(reg)
	require.NoError(t, err)
	var cachedEvents atomic.Int32
	hook := HookFunc(func(_ context.Context, e Event) {
		if e.Cached {
			cachedEvents.Add(1)
		}
	})
	var c counter
	h := newMiddleware(t, Options{Store: store, CacheEntries: 10, Hooks: []Hook{metrics, hook}}).Handler(c.handler(201))

	first := call(h, "POST", "k1", `{"amount":100}`, nil)
	require.Equal(t, 201, first.Code)
	require.EqualValues(t, 1, store.claims.Load())

	for range 3 {
		w := call(h, "POST", "k1", `{"amount":100}`, nil)
		assert.Equal(t, 201, w.Code)
		assert.Equal(t, "true", w.Header().Get(HeaderReplayed))
		assert.Equal(t, "1", w.Header().Get("X-Charge"))
		assert.Equal(t, first.Body.String(), w.Body.String())
	}
	assert.Equal(t, 1, c.count(), "the handler ran once")
	assert.EqualValues(t, 1, store.claims.Load(), "the replays did not ask the store")
	assert.EqualValues(t, 3, cachedEvents.Load())
	assert.Equal(t, 3.0, testutil.ToFloat64(metrics.cachedReplays))
	assert.Equal(t, 3.0, testutil.ToFloat64(metrics.byResult[ResultReplayed]))

	// Another payload under the key: 422, from the cached fingerprint.
	assert.Equal(t, 422, call(h, "POST", "k1", `{"amount":999}`, nil).Code)
	assert.EqualValues(t, 1, store.claims.Load())

	// Another caller's k1 is another key: the store is asked, the handler runs.
	other := call(h, "POST", "k1", `{"amount":100}`, http.Header{"Authorization": {"Bearer other"}})
	assert.Equal(t, 201, other.Code)
	assert.Empty(t, other.Header().Get(HeaderReplayed))
	assert.Equal(t, 2, c.count())
	assert.EqualValues(t, 2, store.claims.Load())
}

// A key completed by another process is read from the store once, then
// answered from memory.
func TestReplayCacheFilledByAStoreReplay(t *testing.T) {
	store := &claimCounter{Store: mem(t)}
	var c counter
	elsewhere := newMiddleware(t, Options{Store: store.Store}).Handler(c.handler(201))
	require.Equal(t, 201, call(elsewhere, "POST", "k", `{}`, nil).Code)

	h := newMiddleware(t, Options{Store: store, CacheEntries: 10}).Handler(c.handler(201))
	for range 3 {
		w := call(h, "POST", "k", `{}`, nil)
		assert.Equal(t, "true", w.Header().Get(HeaderReplayed))
	}
	assert.EqualValues(t, 1, store.claims.Load(), "one read from the store, then the cache")
	assert.Equal(t, 1, c.count())
}

// The cache holds at most CacheEntries records, and none larger than
// CacheBytes: past either, replays ask the store, and answer the same.
func TestReplayCacheBounds(t *testing.T) {
	t.Run("entries", func(t *testing.T) {
		store := &claimCounter{Store: mem(t)}
		var c counter
		m := newMiddleware(t, Options{Store: store, CacheEntries: 2})
		h := m.Handler(c.handler(201))
		for _, k := range []string{"a", "b", "c"} {
			require.Equal(t, 201, call(h, "POST", k, `{}`, nil).Code)
		}
		assert.Equal(t, 2, m.cache.len())
		before := store.claims.Load()
		assert.Equal(t, "true", call(h, "POST", "a", `{}`, nil).Header().Get(HeaderReplayed))
		assert.Equal(t, before+1, store.claims.Load(), "the least recently used record was let go: the store answers")
		assert.Equal(t, 3, c.count())
	})
	t.Run("bytes", func(t *testing.T) {
		store := &claimCounter{Store: mem(t)}
		m := newMiddleware(t, Options{Store: store, CacheEntries: 10, CacheBytes: 512})
		big := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(201)
			w.Write([]byte(strings.Repeat("x", 1024)))
		})
		h := m.Handler(big)
		require.Equal(t, 201, call(h, "POST", "big", `{}`, nil).Code)
		assert.Equal(t, 0, m.cache.len(), "a record over CacheBytes is not cached")
		w := call(h, "POST", "big", `{}`, nil)
		assert.Equal(t, "true", w.Header().Get(HeaderReplayed))
		assert.Equal(t, 1024, w.Body.Len())
		assert.EqualValues(t, 2, store.claims.Load())
	})
}

// lasting keeps every completed record ten times its retention: a store
// whose record outlives the cache's entry.
type lasting struct{ Store }

func (l lasting) Complete(ctx context.Context, p CompleteParams) error {
	p.Retention *= 10
	return l.Store.Complete(ctx, p)
}

// An entry expires with its record's retention, measured from before the
// completion: after it, the store is asked again.
func TestReplayCacheExpiry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := &claimCounter{Store: lasting{mem(t)}}
		var c counter
		h := newMiddleware(t, Options{Store: store, CacheEntries: 10, Retention: 2 * time.Second, LockTimeout: 500 * time.Millisecond}).Handler(c.handler(201))
		require.Equal(t, 201, call(h, "POST", "k", `{}`, nil).Code)
		time.Sleep(1900 * time.Millisecond)
		assert.Equal(t, "true", call(h, "POST", "k", `{}`, nil).Header().Get(HeaderReplayed))
		assert.EqualValues(t, 1, store.claims.Load(), "within the retention: from the cache")
		time.Sleep(200 * time.Millisecond)
		assert.Equal(t, "true", call(h, "POST", "k", `{}`, nil).Header().Get(HeaderReplayed))
		assert.EqualValues(t, 2, store.claims.Load(), "past it: the entry is gone, the store answers (its record lasts longer)")
		assert.Equal(t, 1, c.count())
	})
}

// A Runner's duplicate of a key it ran is answered from memory, with a
// result of its own: changing one result does not change the next.
func TestRunnerReplayCache(t *testing.T) {
	store := &claimCounter{Store: mem(t)}
	r, err := NewRunner(RunnerOptions{Store: store, Kind: "emails", CacheEntries: 10})
	require.NoError(t, err)
	var runs atomic.Int32
	job := func(context.Context) ([]byte, error) { runs.Add(1); return []byte("sent"), nil }
	ctx := context.Background()
	out, replayed, err := r.Do(ctx, "order-1", job)
	require.NoError(t, err)
	require.False(t, replayed)
	out[0] = 'X' // the caller's to change
	for range 2 {
		got, replayed, err := r.Do(ctx, "order-1", job)
		require.NoError(t, err)
		assert.True(t, replayed)
		assert.Equal(t, "sent", string(got))
		got[0] = 'Y'
	}
	assert.EqualValues(t, 1, runs.Load())
	assert.EqualValues(t, 1, store.claims.Load(), "the duplicates did not ask the store")
}

func TestReplayCacheOptions(t *testing.T) {
	for _, o := range []Options{{CacheEntries: -1}, {CacheEntries: 1, CacheBytes: -1}, {CacheBytes: 1024}} {
		_, err := New(o)
		assert.Error(t, err, "%+v", o)
	}
	_, err := NewRunner(RunnerOptions{CacheEntries: -1})
	assert.Error(t, err)
	m := newMiddleware(t, Options{CacheEntries: 5})
	require.NotNil(t, m.cache)
	assert.EqualValues(t, DefaultCacheBytes, m.cache.maxBytes)
	assert.Nil(t, newMiddleware(t, Options{}).cache, "no cache unless asked for")
}

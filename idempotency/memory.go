package idempotency

import (
	"container/heap"
	"container/list"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// MemoryStore is an in-process Store: the default, for one instance or for
// tests. Several processes need a shared store (redisstore, pgstore).
//
// It holds at most MaxEntries records. When full, a new claim first evicts
// an expired claim, then the oldest completed record; in-flight claims are
// never evicted, since that would let a duplicate run, so a store full of
// in-flight claims refuses new ones with ErrStoreFull (the middleware
// answers 503). Each of these choices is O(1) or O(log n): a full store
// refuses as fast as an empty one accepts.
//
// Its replay window is therefore the shorter of Retention and the time it
// takes to complete MaxEntries other requests: at 10,000 requests/s the
// default 100,000 entries keep a key for 10 s, not 24 h. A retry that comes
// later runs the handler again. EvictedEarly, and the
// idempotency_memory_evicted_early_total metric, count the completed
// records evicted before their retention ended: if it grows, raise
// MaxEntries or use a shared store.
type MemoryStore struct {
	max   int
	early atomic.Uint64

	mu       sync.Mutex
	entries  map[string]*memEntry // guarded by mu
	inFlight claimHeap            // in-flight claims by expiry; guarded by mu
	done     list.List            // of *memEntry, completed, oldest first; guarded by mu
	counters []prometheus.Counter // told of early evictions; guarded by mu
}

type memEntry struct {
	key     string
	owner   string
	rec     Record
	expires time.Time
	index   int           // in inFlight, while in flight
	el      *list.Element // in done, once completed
}

// DefaultMaxEntries is the MemoryStore capacity when NewMemoryStore is
// given 0.
const DefaultMaxEntries = 100_000

// ErrStoreFull is returned by a MemoryStore whose every entry is a live
// in-flight claim.
var ErrStoreFull = errors.New("idempotency: memory store full of in-flight claims")

// NewMemoryStore returns a store of at most maxEntries records; 0 means
// DefaultMaxEntries, a negative number is an error.
func NewMemoryStore(maxEntries int) (*MemoryStore, error) {
	if maxEntries < 0 {
		return nil, fmt.Errorf("idempotency: NewMemoryStore: maxEntries %d is negative", maxEntries)
	}
	if maxEntries == 0 {
		maxEntries = DefaultMaxEntries
	}
	return &MemoryStore{max: maxEntries, entries: map[string]*memEntry{}}, nil
}

// Len reports the number of records held, expired ones not yet evicted
// included.
func (s *MemoryStore) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.entries)
}

// EvictedEarly reports how many completed records were evicted to make
// room before their retention ended: each is a key whose retry would run
// the handler again.
func (s *MemoryStore) EvictedEarly() uint64 { return s.early.Load() }

// countEarlyEvictionsIn adds c to the counters told of early evictions.
func (s *MemoryStore) countEarlyEvictionsIn(c prometheus.Counter) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, have := range s.counters {
		if have == c {
			return
		}
	}
	s.counters = append(s.counters, c)
}

// Claim implements Store.
func (s *MemoryStore) Claim(_ context.Context, p ClaimParams) (*Record, error) {
	key, fingerprint, owner, lock := p.Key, p.Fingerprint, p.Owner, p.Lock
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.entries[key]; ok {
		if now.Before(e.expires) {
			if e.rec.Response == nil && e.owner == owner {
				return nil, nil // ours already: a repeated Claim
			}
			rec := e.rec
			rec.Expires = e.expires
			return &rec, nil
		}
		s.remove(e)
	}
	if len(s.entries) >= s.max && !s.evict(now) {
		return nil, ErrStoreFull
	}
	e := &memEntry{key: key, owner: owner, rec: Record{Fingerprint: fingerprint}, expires: now.Add(lock)}
	s.entries[key] = e
	heap.Push(&s.inFlight, e)
	return nil, nil
}

// Extend implements Store.
func (s *MemoryStore) Extend(_ context.Context, p ExtendParams) error {
	key, owner, lock := p.Key, p.Owner, p.Lock
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.owned(key, owner, now)
	if e == nil {
		return ErrNotOwner
	}
	e.expires = now.Add(lock)
	heap.Fix(&s.inFlight, e.index)
	return nil
}

// Complete implements Store.
func (s *MemoryStore) Complete(_ context.Context, p CompleteParams) error {
	key, owner, resp, retention := p.Key, p.Owner, p.Response, p.Retention
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.owned(key, owner, now)
	if e == nil {
		return ErrNotOwner
	}
	heap.Remove(&s.inFlight, e.index)
	e.rec.Response = resp
	e.expires = now.Add(retention)
	e.el = s.done.PushBack(e)
	return nil
}

// Release implements Store.
func (s *MemoryStore) Release(_ context.Context, p ReleaseParams) error {
	key, owner := p.Key, p.Owner
	s.mu.Lock()
	defer s.mu.Unlock()
	if e := s.owned(key, owner, time.Now()); e != nil {
		s.remove(e)
	}
	return nil
}

// owned returns owner's live in-flight entry for key, or nil. s.mu must be
// held.
func (s *MemoryStore) owned(key, owner string, now time.Time) *memEntry {
	e, ok := s.entries[key]
	if !ok || e.owner != owner || e.rec.Response != nil || !now.Before(e.expires) {
		return nil
	}
	return e
}

// evict makes room for one entry: the in-flight claim that expired first,
// if it has, or else the oldest completed record. It reports whether there
// is room. s.mu must be held.
func (s *MemoryStore) evict(now time.Time) bool {
	if len(s.inFlight) > 0 && !now.Before(s.inFlight[0].expires) {
		s.remove(s.inFlight[0])
		return true
	}
	if front := s.done.Front(); front != nil {
		e := front.Value.(*memEntry)
		if now.Before(e.expires) {
			s.early.Add(1)
			for _, c := range s.counters {
				c.Inc()
			}
		}
		s.remove(e)
		return true
	}
	return false
}

// remove deletes e from the map and from the heap or the list. s.mu must
// be held.
func (s *MemoryStore) remove(e *memEntry) {
	delete(s.entries, e.key)
	if e.el != nil {
		s.done.Remove(e.el)
		e.el = nil
	} else {
		heap.Remove(&s.inFlight, e.index)
	}
}

// claimHeap orders in-flight entries by expiry, soonest first.
type claimHeap []*memEntry

func (h claimHeap) Len() int           { return len(h) }
func (h claimHeap) Less(i, j int) bool { return h[i].expires.Before(h[j].expires) }
func (h claimHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *claimHeap) Push(x any) {
	e := x.(*memEntry)
	e.index = len(*h)
	*h = append(*h, e)
}
func (h *claimHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return e
}

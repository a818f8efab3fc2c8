package idempotency

import (
	"container/list"
	"context"
	"errors"
	"sync"
	"time"
)

// MemoryStore is an in-process Store: the default, for one instance or for
// tests. Several processes need a shared store (redisstore, pgstore).
//
// It holds at most MaxEntries records. When full, a new claim first evicts
// expired records, then the oldest completed ones; in-flight claims are
// never evicted, since that would let a duplicate run, so a store full of
// in-flight claims refuses new ones with ErrStoreFull (the middleware
// answers 503). A flood of keys therefore costs a bounded amount of memory
// and, at worst, the replays of the oldest keys.
//
// The zero value is not usable; call NewMemoryStore.
type MemoryStore struct {
	max int

	mu      sync.Mutex
	entries map[string]*list.Element // of *memEntry; guarded by mu
	order   list.List                // oldest claim first; guarded by mu
}

type memEntry struct {
	key     string
	owner   string
	rec     Record
	expires time.Time
}

// DefaultMaxEntries is the MemoryStore capacity when NewMemoryStore is
// given 0.
const DefaultMaxEntries = 100_000

// ErrStoreFull is returned by a MemoryStore whose every entry is an
// in-flight claim.
var ErrStoreFull = errors.New("idempotency: memory store full of in-flight claims")

// NewMemoryStore returns a store of at most maxEntries records; 0 means
// DefaultMaxEntries.
func NewMemoryStore(maxEntries int) *MemoryStore {
	if maxEntries <= 0 {
		maxEntries = DefaultMaxEntries
	}
	return &MemoryStore{max: maxEntries, entries: map[string]*list.Element{}}
}

// Len reports the number of records held, expired ones not yet evicted
// included.
func (s *MemoryStore) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.entries)
}

// Claim implements Store.
func (s *MemoryStore) Claim(_ context.Context, key, fingerprint, owner string, lock time.Duration) (*Record, error) {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if el, ok := s.entries[key]; ok {
		e := el.Value.(*memEntry)
		if now.Before(e.expires) {
			rec := e.rec
			return &rec, nil
		}
		s.remove(el)
	}
	if len(s.entries) >= s.max && !s.evict(now) {
		return nil, ErrStoreFull
	}
	e := &memEntry{key: key, owner: owner, rec: Record{Fingerprint: fingerprint}, expires: now.Add(lock)}
	s.entries[key] = s.order.PushBack(e)
	return nil, nil
}

// Complete implements Store.
func (s *MemoryStore) Complete(_ context.Context, key, owner string, resp *Response, retention time.Duration) error {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.owned(key, owner, now)
	if e == nil {
		return ErrNotOwner
	}
	e.rec.Response = resp
	e.expires = now.Add(retention)
	return nil
}

// Release implements Store.
func (s *MemoryStore) Release(_ context.Context, key, owner string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e := s.owned(key, owner, time.Now()); e != nil {
		s.remove(s.entries[key])
	}
	return nil
}

// owned returns owner's live in-flight entry for key, or nil. s.mu must be
// held.
func (s *MemoryStore) owned(key, owner string, now time.Time) *memEntry {
	el, ok := s.entries[key]
	if !ok {
		return nil
	}
	e := el.Value.(*memEntry)
	if e.owner != owner || e.rec.Response != nil || !now.Before(e.expires) {
		return nil
	}
	return e
}

// evict makes room for one entry by removing, from the oldest claim on,
// the first entry that is expired or completed; live in-flight claims are
// skipped (there are at most as many as requests in progress). It reports
// whether there is room. s.mu must be held.
func (s *MemoryStore) evict(now time.Time) bool {
	for el := s.order.Front(); el != nil; el = el.Next() {
		e := el.Value.(*memEntry)
		if !now.Before(e.expires) || e.rec.Response != nil {
			s.remove(el)
			return true
		}
	}
	return false
}

func (s *MemoryStore) remove(el *list.Element) {
	delete(s.entries, el.Value.(*memEntry).key)
	s.order.Remove(el)
}

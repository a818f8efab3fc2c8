package idempotency

import (
	"container/list"
	"fmt"
	"sync"
	"time"
)

// DefaultCacheBytes bounds a replay cache's bodies and headers when
// CacheEntries is set and CacheBytes is not.
const DefaultCacheBytes = 64 << 20

// replayCache keeps completed records in this process's memory, so that a
// replay is answered without a store round trip. A completed record does
// not change until it expires (a claim takes over only an expired record,
// a release deletes only one in flight), so an entry answers as the store
// would until its expiry, which is never later than the record's. What it
// cannot know: a record deleted from the store before its expiry (by hand,
// or a store that lost it) is still replayed from the cache until the
// entry expires; a key completed by another process is read from the store
// as without a cache, and cached from then on.
//
// It is bounded by entries and by bytes, least recently used out first,
// and safe for concurrent use. The nil *replayCache caches nothing.
type replayCache struct {
	maxEntries int
	maxBytes   int64

	mu    sync.Mutex
	bytes int64
	order *list.List // of *cached, most recently used first
	byKey map[string]*list.Element
}

type cached struct {
	key  string
	rec  Record // completed: Response set, cached set; never changed once put (get hands it out)
	size int64
}

// newReplayCache returns the cache the options ask for, nil for none.
func newReplayCache(entries int, bytes int64) (*replayCache, error) {
	switch {
	case entries < 0:
		return nil, fmt.Errorf("idempotency: CacheEntries %d is negative", entries)
	case bytes < 0:
		return nil, fmt.Errorf("idempotency: CacheBytes %d is negative", bytes)
	case entries == 0 && bytes > 0:
		return nil, fmt.Errorf("idempotency: CacheBytes %d without CacheEntries: set both, or neither", bytes)
	case entries == 0:
		return nil, nil
	}
	if bytes == 0 {
		bytes = DefaultCacheBytes
	}
	return &replayCache{maxEntries: entries, maxBytes: bytes, order: list.New(), byKey: map[string]*list.Element{}}, nil
}

// recordSize is what an entry counts against the byte bound: its body,
// its header's names and values, and a fixed share for the rest.
func recordSize(key string, rec *Record) int64 {
	n := int64(len(key) + len(rec.Fingerprint) + 128)
	if r := rec.Response; r != nil {
		n += int64(len(r.Body))
		for k, vs := range r.Header {
			n += int64(len(k))
			for _, v := range vs {
				n += int64(len(v)) + 16
			}
		}
	}
	return n
}

// get returns the completed record of key while its entry lives.
func (c *replayCache) get(key string, now time.Time) *Record {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.byKey[key]
	if !ok {
		return nil
	}
	en := e.Value.(*cached)
	if !now.Before(en.rec.Expires) {
		c.remove(e)
		return nil
	}
	c.order.MoveToFront(e)
	return &en.rec // immutable once put, as its record is until it expires
}

// put keeps rec, a completed record of key that expires at rec.Expires.
// A record larger than the byte bound, or already expired, is not kept.
func (c *replayCache) put(key string, rec Record, now time.Time) {
	if c == nil || rec.Response == nil || !now.Before(rec.Expires) {
		return
	}
	rec.cached = true // it answers as the cache from now on
	size := recordSize(key, &rec)
	if size > c.maxBytes {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.byKey[key]; ok {
		c.remove(e)
	}
	c.byKey[key] = c.order.PushFront(&cached{key: key, rec: rec, size: size})
	c.bytes += size
	for c.order.Len() > c.maxEntries || c.bytes > c.maxBytes {
		c.remove(c.order.Back())
	}
}

func (c *replayCache) remove(e *list.Element) {
	en := c.order.Remove(e).(*cached)
	delete(c.byKey, en.key)
	c.bytes -= en.size
}

// len is how many entries the cache holds, for its tests.
func (c *replayCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len()
}

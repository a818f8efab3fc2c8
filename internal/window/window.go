// Package window counts events and the share of them that were hits (the
// failures of a circuit breaker, the rejections of a throttle) over a
// rolling window, lock-free, with time passed in, so that retryhttp and
// the retrystorm simulator share it.
package window

import (
	"sync/atomic"
	"time"
)

// Window counts events in Buckets buckets of d/Buckets each. A bucket is
// one atomic word, epoch | hits | events, so that counting an event, and
// starting a bucket afresh when its epoch has passed, is one
// compare-and-swap. The zero Window is not usable; use New.
type Window struct {
	width   int64        // nanoseconds per bucket
	latest  atomic.Int64 // the latest bucket counted in, unwrapped
	buckets [Buckets]atomic.Uint64
}

// Buckets is how many buckets a window is cut into: its resolution is
// d/Buckets, and an event leaves the count between d·(1 − 1/Buckets) and
// d after it was counted.
const Buckets = 10

// The bucket word: epoch (24 bits) | hits (20) | events (20). A count
// stops at its maximum, about a million per bucket; the epoch wraps every
// 16 M buckets, far past any window.
const (
	countBits  = 20
	countMax   = 1<<countBits - 1
	epochShift = 2 * countBits
	epochMask  = 1<<(64-epochShift) - 1
)

func unpack(w uint64) (epoch, hits, events uint64) {
	return w >> epochShift, w >> countBits & countMax, w & countMax
}

func packBucket(epoch, hits, events uint64) uint64 {
	return epoch<<epochShift | hits<<countBits | events
}

// New returns an empty window of d.
func New(d time.Duration) *Window {
	return &Window{width: max(1, int64(d)/Buckets)}
}

func (w *Window) epoch(now time.Time) uint64 { return uint64(now.UnixNano()/w.width) & epochMask }

// Add counts one event at now, a hit or not. An event a whole window
// older than the latest one counted is outside every count and dropped:
// counted late (at the time its attempt was sent), it would otherwise
// start its bucket afresh over the later events there.
func (w *Window) Add(hit bool, now time.Time) {
	full := now.UnixNano() / w.width
	for {
		latest := w.latest.Load()
		if full <= latest-Buckets {
			return
		}
		if full <= latest || w.latest.CompareAndSwap(latest, full) {
			break
		}
	}
	epoch := uint64(full) & epochMask
	b := &w.buckets[epoch%Buckets]
	var f uint64
	if hit {
		f = 1
	}
	for {
		old := b.Load()
		e, bf, bc := unpack(old)
		next := packBucket(epoch, f, 1)
		if e == epoch {
			if bc == countMax {
				break // full: the share is known well enough
			}
			next = packBucket(epoch, min(bf+f, countMax), bc+1)
		}
		if b.CompareAndSwap(old, next) {
			break
		}
	}
}

// Sums returns the hits and the events within the window at now.
func (w *Window) Sums(now time.Time) (hits, events uint64) {
	epoch := w.epoch(now)
	for i := range w.buckets {
		e, bh, be := unpack(w.buckets[i].Load())
		if (epoch-e)&epochMask < Buckets {
			hits += bh
			events += be
		}
	}
	return hits, events
}

// Hit reports whether any bucket counts a hit, however old.
func (w *Window) Hit() bool {
	for i := range w.buckets {
		if _, f, _ := unpack(w.buckets[i].Load()); f > 0 {
			return true
		}
	}
	return false
}

// Reset forgets every event.
func (w *Window) Reset() {
	for i := range w.buckets {
		w.buckets[i].Store(0)
	}
	w.latest.Store(0)
}

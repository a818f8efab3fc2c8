package circuit

import (
	"sync/atomic"
	"time"
)

// window counts a closed circuit's recent outcomes for the failure-ratio
// rule, in Buckets buckets of Window/Buckets each. A bucket is one atomic
// word, epoch | failures | calls, so that counting an outcome, and
// starting a bucket afresh when its epoch has passed, is one
// compare-and-swap: the closed path stays lock-free. It reads the clock
// once per outcome.
type window struct {
	width   int64 // nanoseconds per bucket
	buckets [Buckets]atomic.Uint64
}

// Buckets is how many buckets a window is cut into: its resolution is
// Window/Buckets, and an outcome leaves the count between Window and
// Window·(1 − 1/Buckets) after it was counted.
const Buckets = 10

// The bucket word: epoch (24 bits) | failures (20) | calls (20). A count
// stops at its maximum, about a million per bucket; the epoch wraps every
// 16 M buckets, far past any window.
const (
	countBits  = 20
	countMax   = 1<<countBits - 1
	epochShift = 2 * countBits
	epochMask  = 1<<(64-epochShift) - 1
)

func unpack(w uint64) (epoch, failures, calls uint64) {
	return w >> epochShift, w >> countBits & countMax, w & countMax
}

func packBucket(epoch, failures, calls uint64) uint64 {
	return epoch<<epochShift | failures<<countBits | calls
}

func newWindow(d time.Duration) *window {
	return &window{width: max(1, int64(d)/Buckets)}
}

// add counts one outcome at now and, for a failure, reports the failures
// and calls within the window.
func (w *window) add(failure bool, now time.Time) (failures, calls uint64) {
	epoch := uint64(now.UnixNano()/w.width) & epochMask
	b := &w.buckets[epoch%Buckets]
	var f uint64
	if failure {
		f = 1
	}
	for {
		old := b.Load()
		e, bf, bc := unpack(old)
		next := packBucket(epoch, f, 1)
		if e == epoch {
			if bc == countMax {
				break // full: the ratio is known well enough
			}
			next = packBucket(epoch, min(bf+f, countMax), bc+1)
		}
		if b.CompareAndSwap(old, next) {
			break
		}
	}
	if !failure {
		return 0, 0
	}
	for i := range w.buckets {
		e, bf, bc := unpack(w.buckets[i].Load())
		if (epoch-e)&epochMask < Buckets {
			failures += bf
			calls += bc
		}
	}
	return failures, calls
}

// failing reports whether any bucket counts a failure.
func (w *window) failing() bool {
	for i := range w.buckets {
		if _, f, _ := unpack(w.buckets[i].Load()); f > 0 {
			return true
		}
	}
	return false
}

// reset forgets every outcome.
func (w *window) reset() {
	for i := range w.buckets {
		w.buckets[i].Store(0)
	}
}

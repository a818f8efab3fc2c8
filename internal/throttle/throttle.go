// Package throttle is adaptive client-side throttling's rule, from the
// Google SRE book (chapter 21): per host, over a rolling window, the
// attempts asked for (requests) and those the host accepted (accepts);
// a new attempt is rejected locally with probability
// max(0, (requests − K·accepts) / (requests + 1)). Time is passed in, so
// that retryhttp.Throttle and the retrystorm simulator share it.
package throttle

import (
	"math"
	"sync/atomic"
	"time"

	"github.com/retryhttp/retryhttp/internal/window"
)

// Host is one host's counts: events are the attempts asked for, hits those
// not accepted, local rejections included. It is safe for concurrent use.
type Host struct {
	w          *window.Window
	d          time.Duration
	min        uint64
	lastReject atomic.Int64 // UnixNano of the latest rejection counted: none in the window means no local rejection
}

// New returns a host's counts over d, rejecting nothing while they hold
// fewer than minRequests requests.
func New(d time.Duration, minRequests int) *Host {
	h := &Host{w: window.New(d), d: d, min: uint64(max(0, minRequests))}
	h.lastReject.Store(math.MinInt64 / 2)
	return h
}

// Probability is the rejection probability at now.
func (h *Host) Probability(k float64, now time.Time) float64 {
	if now.UnixNano()-h.lastReject.Load() > int64(h.d) {
		return 0 // no rejection in the window: the healthy path sums nothing
	}
	rejected, requests := h.w.Sums(now)
	if requests < h.min {
		return 0
	}
	accepts := float64(requests - rejected)
	return max(0, (float64(requests)-k*accepts)/(float64(requests)+1))
}

// Allow decides one attempt at now; draw, uniform in [0, 1), is called
// only when the rejection probability is not 0, so that the healthy path
// draws no random number. A local rejection is counted at once; an attempt
// let through is counted by Count when its outcome is known.
func (h *Host) Allow(k float64, now time.Time, draw func() float64) bool {
	if p := h.Probability(k, now); p > 0 && draw() < p {
		h.reject(now)
		return false
	}
	return true
}

// Count records the outcome of an attempt Allow let through.
func (h *Host) Count(accepted bool, now time.Time) {
	if accepted {
		h.w.Add(false, now)
		return
	}
	h.reject(now)
}

// reject counts a rejection at now.
func (h *Host) reject(now time.Time) {
	h.w.Add(true, now)
	if n := now.UnixNano(); n > h.lastReject.Load() {
		h.lastReject.Store(n) // a race may keep an earlier time: off by one rejection's spacing at most
	}
}

// Rejecting reports whether the host's counts hold a rejection.
func (h *Host) Rejecting() bool { return h.w.Hit() }

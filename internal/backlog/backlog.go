// Package backlog is the wait a server tells the requests it sheds, from
// what it measured: when its handler will have served the requests shed
// before. Time and randomness are passed in, so that overload.Shedder
// and the retrystorm simulator share it.
package backlog

import (
	"math"
	"time"
)

// Max bounds the wait a shed request is told, however long the backlog.
const Max = time.Minute

// Step is the time a handler that serves limit requests at once, each in
// latency, takes to serve one more at half its capacity (Little's law,
// with a margin of 2.5): at full capacity, arrivals that are not evenly
// spaced find the limit taken often enough to be shed again.
func Step(latency time.Duration, limit int64) time.Duration {
	return 5 * latency / time.Duration(2*max(1, limit))
}

// Horizon is when the handler will have served the requests shed so far.
// The zero Horizon is in the past: the first request shed is told the
// least. It is not safe for concurrent use; its owner locks it.
type Horizon struct{ at time.Time }

// Wait places a request shed at now one step after the horizon and
// returns its Retry-After in whole seconds: its place, spread uniformly
// over half to one and a half times it (u1), so that the requests shed
// in one instant come back over a window as long as their wait, and then
// rounded down after adding a uniform fraction (u2), so that its expected
// wait is its place and those told the same second do not return in
// step. At least 1 (Retry-After has no finer unit) and at most Max. u1
// and u2 are uniform in [0, 1).
func (h *Horizon) Wait(now time.Time, step time.Duration, u1, u2 float64) int {
	if h.at.Before(now) {
		h.at = now
	}
	if h.at.Sub(now) < Max {
		h.at = h.at.Add(step)
	}
	wait := h.at.Sub(now).Seconds()*(0.5+u1) + u2
	return int(min(Max.Seconds(), max(1, math.Floor(wait))))
}

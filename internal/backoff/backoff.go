// Package backoff holds the wait computations of retryhttp.Policy as pure
// functions of (attempt, bounds, random number), so that the Transport and
// the retrystorm simulator run the very same code.
package backoff

import (
	"math"
	"time"
)

// Jitter selects how a wait is drawn from its ceiling. The values are
// retryhttp.Jitter's.
type Jitter int

const (
	Full Jitter = iota
	Equal
	Decorrelated
	None
)

// Ceiling is the largest wait before retry n (0-based: n=0 is the wait
// after the first attempt): min(max, base*2^n), without overflow for any n.
func Ceiling(base, max time.Duration, n int) time.Duration {
	if n < 0 {
		n = 0
	}
	if n >= 62 || base > max>>n {
		return max
	}
	return base << n
}

// Delay is the wait before retry n (0-based) for the given jitter, bounds,
// previous wait (read by Decorrelated only; 0 before the first retry) and a
// uniform random number r in [0, 1).
func Delay(j Jitter, base, max time.Duration, n int, prev time.Duration, r float64) time.Duration {
	switch j {
	case None:
		return Ceiling(base, max, n)
	case Equal:
		c := Ceiling(base, max, n)
		half := c / 2
		return c - half + Scale(half, r)
	case Decorrelated:
		if prev < base {
			prev = base
		}
		hi := time.Duration(math.MaxInt64)
		if prev <= math.MaxInt64/3 {
			hi = 3 * prev
		}
		return min(max, base+Scale(hi-base, r))
	default: // Full
		return Scale(Ceiling(base, max, n), r)
	}
}

// Scale returns d*r for r in [0, 1), never more than d and never negative.
func Scale(d time.Duration, r float64) time.Duration {
	if r <= 0 || d <= 0 {
		return 0
	}
	if r >= 1 {
		return d
	}
	return min(d, time.Duration(float64(d)*r))
}

// Package gradient is the adaptive concurrency limit of package overload,
// with time entering as an argument: the Limiter and the Shedder feed it
// the latencies they measure, the storm simulator those of virtual time.
package gradient

import "time"

// Limit is the Gradient2 limit of Netflix's concurrency-limits
// (Gradient2Limit): the limit follows the ratio of a long-term average of
// the latency to the latest one. While the latest latency stays within
// tolerance of the average the limit grows by growth per sample (smoothed);
// when it rises past it, the limit shrinks in proportion, by half at most
// per sample before smoothing. A limit that is not being used (fewer than
// half of it in flight) does not grow, so that an idle period does not end
// with a limit nothing has tested.
//
// One change of ours: a drop (a timeout, a 429 or a 503) multiplies the
// limit by DropFactor, as concurrency-limits' AIMD limit does, because a
// server that sheds load answers fast and its refusals do not raise the
// latency Gradient2 reads.
//
// A Limit is not safe for concurrent use; its user guards it.
type Limit struct {
	limit     float64
	min, max  float64
	tolerance float64

	long    float64 // the long-term latency average, in nanoseconds
	samples int     // samples averaged so far, up to longWindow
}

// New returns a limit at initial, kept within [lo, hi], that shrinks
// when the latency rises past tolerance times its long-term average.
func New(initial, lo, hi, tolerance float64) Limit {
	return Limit{limit: Clamp(initial, lo, hi), min: lo, max: hi, tolerance: tolerance}
}

// Value is the limit now.
func (g *Limit) Value() float64 { return g.limit }

// Long is the long-term latency average.
func (g *Limit) Long() time.Duration { return time.Duration(g.long) }

const (
	// longWindow is how many samples the long-term average spans (an
	// exponential average with factor 2/(longWindow+1)), after a plain
	// average of the first longWarmup.
	longWindow = 600
	longWarmup = 10
	// DropFactor is what a drop multiplies the limit by.
	DropFactor = 0.9
	// smoothing and growth are Gradient2's: each sample moves the limit a
	// fifth of the way to its new value, and a limit whose latency stays
	// within tolerance grows by 4 per sample before smoothing.
	smoothing = 0.2
	growth    = 4
)

// The shares of the limit, in percent, that a Shedder admits a Default
// and a Sheddable request below; a Critical one may fill it all. Percent
// so that "fewer than 80% of 4" is compared exactly (3 in flight admit
// one more), not rounded down.
const (
	ShareDefault   = 80
	ShareSheddable = 50
)

// Update moves the limit after a sample: an attempt that took rtt while
// inflight attempts (itself included) were running, and was a drop or not.
// It returns the new limit.
func (g *Limit) Update(rtt time.Duration, inflight int, drop bool) float64 {
	if drop {
		g.limit = Clamp(g.limit*DropFactor, g.min, g.max)
		return g.limit
	}
	short := float64(max(rtt, time.Microsecond))
	if g.samples < longWarmup {
		g.samples++
		g.long += (short - g.long) / float64(g.samples)
	} else {
		g.long += (short - g.long) * 2 / (longWindow + 1)
	}
	if g.long/short > 2 {
		// The latency fell well below the average (the dependency
		// recovered): let the average come down faster.
		g.long *= 0.95
	}
	if float64(inflight) < g.limit/2 {
		return g.limit
	}
	ratio := Clamp(g.tolerance*g.long/short, 0.5, 1)
	next := g.limit*ratio + growth
	g.limit = Clamp(g.limit*(1-smoothing)+next*smoothing, g.min, g.max)
	return g.limit
}

// Clamp returns v within [lo, hi].
func Clamp(v, lo, hi float64) float64 { return min(max(v, lo), hi) }

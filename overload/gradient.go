package overload

import "time"

// gradient is the Gradient2 limit of Netflix's concurrency-limits
// (Gradient2Limit): the limit follows the ratio of a long-term average of
// the latency to the latest one. While the latest latency stays within
// tolerance of the average the limit grows by growth per sample (smoothed);
// when it rises past it, the limit shrinks in proportion, by half at most
// per sample before smoothing. A limit that is not being used (fewer than
// half of it in flight) does not grow, so that an idle period does not end
// with a limit nothing has tested.
//
// One change of ours: a drop (a timeout, a 429 or a 503) multiplies the
// limit by dropFactor, as concurrency-limits' AIMD limit does, because a
// server that sheds load answers fast and its refusals do not raise the
// latency Gradient2 reads.
//
// A gradient is not safe for concurrent use; the Limiter guards it.
type gradient struct {
	limit     float64
	min, max  float64
	tolerance float64
	smoothing float64
	growth    float64

	long    float64 // the long-term latency average, in nanoseconds
	samples int     // samples averaged so far, up to longWindow
}

const (
	// longWindow is how many samples the long-term average spans (an
	// exponential average with factor 2/(longWindow+1)), after a plain
	// average of the first longWarmup.
	longWindow = 600
	longWarmup = 10
	// dropFactor is what a drop multiplies the limit by.
	dropFactor = 0.9
)

// update moves the limit after a sample: an attempt that took rtt while
// inflight attempts (itself included) were running, and was a drop or not.
// It returns the new limit.
func (g *gradient) update(rtt time.Duration, inflight int, drop bool) float64 {
	if drop {
		g.limit = clamp(g.limit*dropFactor, g.min, g.max)
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
	ratio := clamp(g.tolerance*g.long/short, 0.5, 1)
	next := g.limit*ratio + g.growth
	g.limit = clamp(g.limit*(1-g.smoothing)+next*g.smoothing, g.min, g.max)
	return g.limit
}

func clamp(v, lo, hi float64) float64 { return min(max(v, lo), hi) }

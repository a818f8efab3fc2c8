// Package gradient is the adaptive concurrency limit of package overload,
// with time entering as an argument: the Limiter and the Shedder feed it
// the latencies they measure, the storm simulator those of virtual time.
package gradient

import (
	"math"
	"time"
)

// Limit is an AIMD limit on the latency's rise above its no-load level,
// the rule of TCP Vegas and of Envoy's adaptive concurrency filter read
// as TCP Reno reads a loss. The samples are judged in rounds: a round is
// about a limit's worth of calls (at least minRound) that ended since the
// last decision, so about one latency, of those admitted after the last
// cut. A round whose average latency is
// more than tolerance times the no-load latency cuts the limit to a
// little under the calls in flight at which the latency would be the
// no-load one (under times the calls in flight times the no-load latency
// over the round's, minCut of them at least); any other round of a limit
// in use adds one.
//
// The no-load latency is the average of the rounds that had the fewest
// calls in flight over a window of rounds (see floor). Each cut takes the
// calls in flight a little under what the server can serve, where its
// latency is its no-load one, so the window keeps measuring it while the
// server stays loaded; Gradient2 judges the latency against its own
// long-term average instead, which rises with the queue it should
// measure, and the limit with it, to every caller there is. A latency
// that rises for everyone (the server's no-load latency itself) cuts the
// limit at first; the cut's round then has the fewest calls in flight and
// its latency becomes the no-load one.
//
// At the start (see phase) the limit descends, then doubles, until its
// first cut: an Initial far from the server's capacity is left in a few
// rounds.
//
// A drop (a timeout, a 429 or a 503) cuts the limit to a fraction of the
// calls in flight (cut: half, less for a tolerance above 1.5) at once,
// once a round, because a server that sheds load answers fast and its
// refusals do not raise the latency. A limit not in use (fewer than half
// of it in flight in a round) does not grow, so that an idle period does
// not end with a limit nothing has tested.
//
// A Limit is not safe for concurrent use; its user guards it.
type Limit struct {
	limit     float64
	min, max  float64
	tolerance float64
	cut       float64 // what a drop multiplies the calls in flight by

	// The round being gathered: the samples of calls admitted at or after
	// the last cut (start) that ended since the last decision. A round of
	// growth takes in the samples of the rounds before it that were still
	// in flight, so that a server that serves its line out of order, and
	// ends its fastest calls first, is judged on its slow ones too.
	start    time.Duration
	sum      float64 // their latencies, in nanoseconds
	n        int
	inflight int // the most in flight any of them saw

	noLoad floor
	latest float64 // the last round's average latency

	phase      phase
	descentAvg float64 // the average of the last round of the descent
}

// phase is where a limit is in its start.
type phase int

const (
	// descending: each round in use halves the limit while halving the
	// calls in flight lowers the latency by a quarter or more, so that an
	// Initial far over a small server's capacity is left in a few rounds,
	// not in a few cycles.
	descending phase = iota
	// doubling: each round in use within the tolerance doubles the
	// limit, as TCP's slow start, until the first cut.
	doubling
	// steady: the rounds cut and add one.
	steady
)

// descentFall is how much lower a round's latency must be than the
// round's before it, at half its calls in flight, for the descent to go
// on: a server past its capacity is at least that much faster at half the
// load (half as fast, linear; a quarter, quadratic), one below it not. The
// fall must be minQueue at least, as a cut's rise must.
const descentFall = 0.75

// New returns a limit at initial, kept within [lo, hi], that is cut
// when the latency rises past tolerance times its no-load level.
func New(initial, lo, hi, tolerance float64) Limit {
	return Limit{limit: Clamp(initial, lo, hi), min: lo, max: hi, tolerance: tolerance,
		cut: min(0.5, 0.75/tolerance), start: math.MinInt64}
}

// Value is the limit now.
func (g *Limit) Value() float64 { return g.limit }

// Latency is the average latency of the last round, 0 before the first.
func (g *Limit) Latency() time.Duration { return time.Duration(g.latest) }

const (
	// under is how far below the calls in flight at the no-load latency
	// a cut goes: a little, so that the rounds after it see that latency,
	// and the server is not starved.
	under = 0.9
	// minCut bounds a cut: to a quarter of the calls in flight at most.
	minCut = 0.25
	// minRound is the fewest samples of a round, so that a small limit's
	// rounds are not judged on one or two latencies.
	minRound = 8
)

// maxOver bounds a sample, as a multiple of the latency that cuts
// (over): one call that waited out a preemption or a GC pause (hundreds of
// milliseconds, among 64 goroutines on 2 cores) would otherwise make a
// round of microsecond calls average past it. A server that is overloaded
// is slow on most of a round's calls, and still averages past it; the cut
// itself is the deepest one (minCut) from about 3.6 times the no-load
// latency, so no sample above maxOver·over makes it deeper.
const maxOver = 4

// minQueue is the least rise of a round's latency over the no-load one
// that cuts the limit. Below it the rise is the client's own scheduling
// (a goroutine woken late, a preemption, a GC pause: tens of
// microseconds, at times more), not a queue at the server: an in-memory
// base under 64 callers on 2 cores cut its limit from 130 to 15 and back
// on rises of 3 to 45 µs, and queued every call behind it. A server
// whose no-load latency is under 2·minQueue (with the default tolerance
// of 1.5) is let run a little further past its knee.
const minQueue = 250 * time.Microsecond

// The shares of the limit, in percent, that a Shedder admits a Default
// and a Sheddable request below; a Critical one may fill it all. Percent
// so that "fewer than 80% of 4" is compared exactly (3 in flight admit
// one more), not rounded down.
const (
	ShareDefault   = 80
	ShareSheddable = 50
)

// Update moves the limit after a sample: a call admitted at admitted,
// ended at now, while inflight calls (itself included) were running, and
// a drop or not. Times are readings of one monotonic clock. A sample
// admitted before the last cut was made under a higher limit and teaches
// nothing. It returns the limit.
func (g *Limit) Update(admitted, now time.Duration, inflight int, drop bool) float64 {
	if admitted < g.start {
		return g.limit
	}
	g.inflight = max(g.inflight, inflight)
	if drop {
		g.limit = Clamp(min(g.limit, float64(g.inflight))*g.cut, g.min, g.max)
		g.phase = steady
		g.next(now, true)
		return g.limit
	}
	base, size := g.noLoad.value(), max(minRound, int(g.limit))
	latency := float64(max(now-admitted, time.Microsecond))
	if base > 0 {
		latency = min(latency, maxOver*g.over(base))
	}
	g.sum += latency
	g.n++
	// The round is judged when it is whole, or as soon as its latencies
	// are sure to average past the tolerance, whatever the rest are: a
	// round at a limit over the server's capacity is its slowest, and the
	// sooner it ends the less it costs.
	if g.n < size && !(base > 0 && g.sum > g.over(base)*float64(size)) {
		return g.limit
	}
	avg := g.sum / float64(g.n)
	g.latest = avg
	base = g.noLoad.add(avg, g.inflight, 2*size)
	used := 2*g.inflight >= int(g.limit)
	if g.phase == descending {
		if used && g.limit > g.min && (g.descentAvg == 0 || g.descentAvg-avg > max((1-descentFall)*g.descentAvg, float64(minQueue))) {
			g.descentAvg = avg
			g.limit = Clamp(min(g.limit, float64(g.inflight))/2, g.min, g.max)
			g.next(now, true)
			return g.limit
		}
		g.phase = doubling
	}
	cut := avg > g.over(base)
	switch {
	case cut:
		g.limit = Clamp(min(g.limit, float64(g.inflight))*max(minCut, under*base/avg), g.min, g.max)
		g.phase = steady
	case used && g.phase == doubling:
		g.limit = Clamp(2*g.limit, g.min, g.max)
	case used:
		g.limit = Clamp(g.limit+1, g.min, g.max)
	}
	g.next(now, cut)
	return g.limit
}

// over is the round average past which a no-load latency of base cuts
// the limit: tolerance times base, and at least minQueue above it.
func (g *Limit) over(base float64) float64 {
	return max(g.tolerance*base, base+float64(minQueue))
}

// next starts a round at now, after a cut or not.
func (g *Limit) next(now time.Duration, cut bool) {
	if cut {
		g.start = now
	}
	g.sum, g.n, g.inflight = 0, 0, 0
}

// floor is the no-load latency: the average latency of the rounds that
// had the fewest calls in flight over the last rounds. They are chosen by
// their calls in flight, not by their latency, so that the lowest of
// noisy averages (a minimum's bias) is not taken for the server's. Two
// buckets, the one being filled and the one before it, each filled for a
// number of rounds, as BBR keeps its minimum RTT.
type floor struct {
	cur, prev level
	rounds    int // added to cur
}

// level is the rounds of a bucket that had the fewest calls in flight.
type level struct {
	inflight int
	sum      float64 // their average latencies
	n        int     // 0: the bucket is empty
}

// add adds a round's average latency and calls in flight, and returns
// the no-load latency; the buckets hold span rounds each.
func (f *floor) add(avg float64, inflight, span int) float64 {
	if f.rounds >= span {
		f.prev, f.cur, f.rounds = f.cur, level{}, 0
	}
	f.rounds++
	switch {
	case f.cur.n == 0 || inflight < f.cur.inflight:
		f.cur = level{inflight: inflight, sum: avg, n: 1}
	case inflight == f.cur.inflight:
		f.cur.sum += avg
		f.cur.n++
	}
	return f.value()
}

// value returns the no-load latency, 0 before the first round.
func (f *floor) value() float64 {
	l := f.cur
	if l.n == 0 || f.prev.n > 0 && f.prev.inflight < l.inflight {
		l = f.prev
	}
	if l.n == 0 {
		return 0
	}
	return l.sum / float64(l.n)
}

// Clamp returns v within [lo, hi].
func Clamp(v, lo, hi float64) float64 { return min(max(v, lo), hi) }

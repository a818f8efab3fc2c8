package gradient

import (
	"testing"
	"time"
)

// The defaults of overload.Options.
func newLimit() *Limit {
	g := New(20, 1, 200, 1.5)
	return &g
}

const base = 10 * time.Millisecond

// closedLoop feeds g rounds of a server that serves c at once at the
// base latency and slows down in proportion past c (latency(n)), with
// every slot of the limit in use, for the given number of samples; it
// returns the mean limit over the second half and the clock after.
func closedLoop(g *Limit, now time.Duration, samples int, latency func(n float64) time.Duration) (float64, time.Duration) {
	var sum float64
	for i := range samples {
		n := max(1, float64(int(g.Value())))
		d := latency(n)
		// the samples of a limit come in over one latency, n at a time
		now += d / time.Duration(n)
		g.Update(now-d, now, int(n), false)
		if i >= samples/2 {
			sum += float64(int(g.Value()))
		}
	}
	return sum / float64(samples-samples/2), now
}

func linearAbove(c float64) func(float64) time.Duration {
	return func(n float64) time.Duration { return time.Duration(float64(base) * max(1, n/c)) }
}

// Whatever the capacity, the limit settles between what the server can
// serve and the tolerance above it, where the latency is the tolerance
// times its no-load level; and it comes down when the capacity halves.
func TestSettlesNearCapacity(t *testing.T) {
	for _, c := range []float64{2, 3, 5, 8, 13, 21, 34, 55, 89} {
		g := newLimit()
		mean, now := closedLoop(g, 0, 20000, linearAbove(c))
		if mean < 0.75*c || mean > 1.5*c {
			t.Errorf("capacity %v: mean limit %.1f, want within [%.1f, %.1f]", c, mean, 0.75*c, 1.5*c)
		}
		half := max(1, c/2)
		mean, _ = closedLoop(g, now, 20000, linearAbove(half))
		if mean < 0.75*half || mean > 1.5*half+1 {
			t.Errorf("capacity %v halved: mean limit %.1f, want within [%.1f, %.1f]", c, mean, 0.75*half, 1.5*half+1)
		}
	}
}

// feed feeds g n samples with callers calls at most in flight, and
// returns the clock after.
func feed(g *Limit, now time.Duration, n, callers int, latency func(n float64) time.Duration) time.Duration {
	for range n {
		in := min(callers, max(1, int(g.Value())))
		d := latency(float64(in))
		now += d / time.Duration(in)
		g.Update(now-d, now, in, false)
	}
	return now
}

// From an Initial far over a small server's capacity (20 against 2, the
// latency a hundredfold at 20), the limit comes down within its first
// 200 calls, a few rounds, not a few cycles; and on a server with room
// for every caller, the descent's first halving is undone by doubling as
// soon.
func TestStart(t *testing.T) {
	quadratic := func(c float64) func(float64) time.Duration {
		return func(n float64) time.Duration { return time.Duration(float64(base) * max(1, (n/c)*(n/c))) }
	}
	g := newLimit()
	feed(g, 0, 200, 48, quadratic(2))
	if g.Value() > 4 {
		t.Errorf("capacity 2, 200 calls from 20: limit %.1f, want at most 4", g.Value())
	}
	g = newLimit()
	feed(g, 0, 200, 48, linearAbove(100))
	if g.Value() < 48 {
		t.Errorf("capacity 100, 48 callers, 200 calls from 20: limit %.1f, want room for the 48", g.Value())
	}
}

// A latency that rises for everyone, whatever the calls in flight (the
// server's no-load latency tripled), cuts the limit at first, and then
// becomes the level it is judged against: the limit does not stay at its
// minimum.
func TestNoLoadLatencyRises(t *testing.T) {
	g := newLimit()
	_, now := closedLoop(g, 0, 5000, linearAbove(40))
	mean, _ := closedLoop(g, now, 20000, func(n float64) time.Duration { return 3 * linearAbove(40)(n) })
	if mean < 30 {
		t.Fatalf("no-load latency tripled at a capacity of 40: mean limit %.1f, want it back near 40", mean)
	}
}

// A limit used by fewer than half of it does not grow: an idle period
// does not end with a limit nothing has tested.
func TestAppLimited(t *testing.T) {
	g := newLimit()
	var now time.Duration
	for range 1000 {
		now += time.Millisecond
		g.Update(now-base, now, 2, false)
	}
	if g.Value() != 20 {
		t.Fatalf("2 in flight under a limit of 20: limit moved to %v", g.Value())
	}
}

// A drop cuts the limit to half the calls in flight, once a round: the
// drops of calls admitted before it do not cut it again.
func TestDropCutsOnceARound(t *testing.T) {
	g := newLimit()
	now := time.Second
	g.Update(now-base, now, 16, true)
	if g.Value() != 8 {
		t.Fatalf("a drop with 16 in flight under 20: limit %v, want 8", g.Value())
	}
	for range 10 {
		g.Update(now-base, now+time.Millisecond, 16, true)
	}
	if g.Value() != 8 {
		t.Fatalf("the drops of calls admitted before the cut: limit %v, want it left at 8", g.Value())
	}
	g.Update(now+time.Millisecond, now+2*time.Millisecond, 8, true)
	if g.Value() != 4 {
		t.Fatalf("a drop admitted after the cut: limit %v, want 4", g.Value())
	}
}

// The limit stays within its bounds whatever the samples.
func TestBounds(t *testing.T) {
	g := New(6, 5, 8, 1.5)
	var now time.Duration
	for range 100 {
		now += time.Second
		g.Update(now-time.Millisecond, now, 8, true)
	}
	if g.Value() != 5 {
		t.Fatalf("after 100 drops: limit %v, want the minimum 5", g.Value())
	}
	for range 1000 {
		now += time.Millisecond
		g.Update(now-time.Millisecond, now, 8, false)
	}
	if g.Value() != 8 {
		t.Fatalf("after 1000 fast samples: limit %v, want the maximum 8", g.Value())
	}
	if g := New(50, 5, 8, 1.5); g.Value() != 8 {
		t.Fatal("an initial limit above the maximum was kept")
	}
}

// The limit settles near capacity whatever the server's no-load latency,
// down to the latencies where minQueue, not the tolerance, is what cuts
// (under 2·minQueue): from a loopback service's half a millisecond to a
// slow backend's tenth of a second.
func TestSettlesNearCapacityAtEveryBase(t *testing.T) {
	for _, b := range []time.Duration{2 * minQueue, time.Millisecond, 10 * time.Millisecond, 100 * time.Millisecond} {
		for _, c := range []float64{2, 8, 32} {
			g := newLimit()
			mean, _ := closedLoop(g, 0, 20000, func(n float64) time.Duration { return time.Duration(float64(b) * max(1, n/c)) })
			if mean < 0.75*c || mean > 1.5*c {
				t.Errorf("base %v, capacity %v: mean limit %.1f, want within [%.1f, %.1f]", b, c, mean, 0.75*c, 1.5*c)
			}
		}
	}
}

// The client's own scheduling is not a server's queue: calls of a few
// microseconds whose latency rises by tens of them (a goroutine woken
// late), and one in a hundred that waits out a preemption or a GC pause
// (tens to hundreds of milliseconds), never cut the limit once it has
// started (its first round halves it, to see whether that helps).
func TestSchedulingNoiseDoesNotCut(t *testing.T) {
	g := newLimit()
	now := time.Duration(0)
	prev := g.Value()
	for i := range 100000 {
		in := min(64, int(g.Value()))
		d := 2*time.Microsecond + time.Duration(i%7)*10*time.Microsecond
		if i%100 == 99 {
			d = time.Duration(10+i%300) * time.Millisecond
		}
		now += 300 * time.Nanosecond
		if v := g.Update(now-d, now, in, false); v < prev && g.phase != descending {
			t.Fatalf("call %d (latency %v, %d in flight): the limit was cut from %v to %v", i, d, in, prev, v)
		} else {
			prev = v
		}
	}
	if g.Value() < 64 {
		t.Errorf("the limit is %v, below the 64 callers it had room for", g.Value())
	}
}

// A server that is overloaded is slow on most calls: capping each sample
// does not keep its rounds from cutting, however slow it gets.
func TestCappedSamplesStillCut(t *testing.T) {
	for _, factor := range []float64{2, 10, 1000} {
		g := newLimit()
		now := feed(g, 0, 400, 8, func(float64) time.Duration { return base })
		before := g.Value()
		feed(g, now, 200, 8, func(float64) time.Duration { return time.Duration(factor * float64(base)) })
		if g.Value() >= before {
			t.Errorf("latency %v times the no-load one: the limit went from %v to %v, want a cut", factor, before, g.Value())
		}
	}
}

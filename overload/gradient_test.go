package overload

import (
	"testing"
	"time"
)

func newGradient() *gradient {
	s := Options{}.resolve()
	return &newLimit(&s, "").g
}

// With the latency steady and the limit in use, the limit grows to Max;
// when the latency doubles it comes down; a drop takes a tenth off.
func TestGradientFollowsLatency(t *testing.T) {
	g := newGradient()
	for range 2000 {
		g.update(10*time.Millisecond, int(g.limit), false)
	}
	if g.limit != DefaultMax {
		t.Fatalf("steady latency, limit in use: limit %v, want %d", g.limit, DefaultMax)
	}
	for range 20 {
		g.update(30*time.Millisecond, int(g.limit), false)
	}
	if g.limit > DefaultMax*0.6 {
		t.Fatalf("latency tripled for 20 samples: limit %v, want it well below %d", g.limit, DefaultMax)
	}
	before := g.limit
	g.update(time.Millisecond, int(g.limit), true)
	if want := before * dropFactor; g.limit != want {
		t.Fatalf("a drop: limit %v, want %v", g.limit, want)
	}
}

// A limit used by fewer than half of it does not grow: an idle period
// does not end with a limit nothing has tested.
func TestGradientAppLimited(t *testing.T) {
	g := newGradient()
	for range 1000 {
		g.update(10*time.Millisecond, 2, false)
	}
	if g.limit != DefaultInitial {
		t.Fatalf("2 in flight under a limit of %d: limit moved to %v", DefaultInitial, g.limit)
	}
}

// The limit stays within its bounds whatever the samples.
func TestGradientBounds(t *testing.T) {
	s := Options{Min: 5, Max: 8, Initial: 6}.resolve()
	lim := newLimit(&s, "")
	g := &lim.g
	for range 100 {
		g.update(time.Second, 8, true)
	}
	if g.limit != 5 {
		t.Fatalf("after 100 drops: limit %v, want Min 5", g.limit)
	}
	for range 1000 {
		g.update(time.Millisecond, 8, false)
	}
	if g.limit != 8 {
		t.Fatalf("after 1000 fast samples: limit %v, want Max 8", g.limit)
	}
}

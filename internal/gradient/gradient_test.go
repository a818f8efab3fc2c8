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

// With the latency steady and the limit in use, the limit grows to its
// maximum; when the latency triples it comes down; a drop takes a tenth
// off.
func TestFollowsLatency(t *testing.T) {
	g := newLimit()
	for range 2000 {
		g.Update(10*time.Millisecond, int(g.limit), false)
	}
	if g.limit != 200 {
		t.Fatalf("steady latency, limit in use: limit %v, want 200", g.limit)
	}
	for range 20 {
		g.Update(30*time.Millisecond, int(g.limit), false)
	}
	if g.limit > 200*0.6 {
		t.Fatalf("latency tripled for 20 samples: limit %v, want it well below 200", g.limit)
	}
	before := g.limit
	g.Update(time.Millisecond, int(g.limit), true)
	if want := before * DropFactor; g.limit != want {
		t.Fatalf("a drop: limit %v, want %v", g.limit, want)
	}
}

// A limit used by fewer than half of it does not grow: an idle period
// does not end with a limit nothing has tested.
func TestAppLimited(t *testing.T) {
	g := newLimit()
	for range 1000 {
		g.Update(10*time.Millisecond, 2, false)
	}
	if g.limit != 20 {
		t.Fatalf("2 in flight under a limit of 20: limit moved to %v", g.limit)
	}
}

// The limit stays within its bounds whatever the samples.
func TestBounds(t *testing.T) {
	g := New(6, 5, 8, 1.5)
	for range 100 {
		g.Update(time.Second, 8, true)
	}
	if g.Value() != 5 {
		t.Fatalf("after 100 drops: limit %v, want the minimum 5", g.Value())
	}
	for range 1000 {
		g.Update(time.Millisecond, 8, false)
	}
	if g.Value() != 8 {
		t.Fatalf("after 1000 fast samples: limit %v, want the maximum 8", g.Value())
	}
	if g := New(50, 5, 8, 1.5); g.Value() != 8 {
		t.Fatal("an initial limit above the maximum was kept")
	}
}

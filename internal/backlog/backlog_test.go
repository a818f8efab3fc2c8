package backlog

import (
	"math/rand/v2"
	"testing"
	"time"
)

func TestStep(t *testing.T) {
	for _, tc := range []struct {
		latency time.Duration
		limit   int64
		want    time.Duration
	}{
		{100 * time.Millisecond, 10, 25 * time.Millisecond},
		{time.Second, 1, 2500 * time.Millisecond},
		{time.Second, 0, 2500 * time.Millisecond}, // a limit below 1 is 1
		{10 * time.Millisecond, 250, 100 * time.Microsecond},
	} {
		if got := Step(tc.latency, tc.limit); got != tc.want {
			t.Errorf("Step(%v, %d) = %v, want %v", tc.latency, tc.limit, got, tc.want)
		}
	}
}

// n requests shed in one instant are told waits whose mean is their
// place behind the horizon, from 1 s to Max, for any step: a burst is
// spread over the time the handler takes to serve it.
func TestWaitSpreadsABurstOverItsBacklog(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	rng := rand.New(rand.NewPCG(1, 2))
	for _, step := range []time.Duration{time.Millisecond, 10 * time.Millisecond, 100 * time.Millisecond, time.Second} {
		for _, n := range []int{1, 50, 500, 5000} {
			var h Horizon
			sum, lo, hi := 0.0, 1<<30, 0
			for range n {
				w := h.Wait(now, step, rng.Float64(), rng.Float64())
				sum += float64(w)
				lo, hi = min(lo, w), max(hi, w)
			}
			if lo < 1 || hi > int(Max.Seconds()) {
				t.Fatalf("step %v, %d shed: waits from %d to %d s, want within [1, %v]", step, n, lo, hi, Max)
			}
			// The expected wait of the i-th is max(1, i·step), capped.
			want := 0.0
			for i := 1; i <= n; i++ {
				want += min(Max.Seconds(), max(1, float64(i)*step.Seconds()))
			}
			want /= float64(n)
			if got := sum / float64(n); got < 0.8*want-0.5 || got > 1.2*want+0.5 {
				t.Errorf("step %v, %d shed: mean wait %.2f s, want about %.2f s", step, n, got, want)
			}
		}
	}
}

// The horizon drains as time passes: a request shed after the backlog
// was served is told the least again.
func TestHorizonDrains(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var h Horizon
	for range 100 {
		h.Wait(now, 100*time.Millisecond, 0.5, 0.5)
	}
	if w := h.Wait(now, 100*time.Millisecond, 0.5, 0.5); w < 9 {
		t.Fatalf("101st of a burst told %d s, want about 10", w)
	}
	if w := h.Wait(now.Add(11*time.Second), 100*time.Millisecond, 0.5, 0.5); w != 1 {
		t.Errorf("after the backlog drained, told %d s, want 1", w)
	}
}

package circuit

import (
	"testing"
	"time"
)

func ratio(r float64, minCalls uint32, window time.Duration) *Settings {
	return &Settings{Probes: 1, OpenFor: 5 * time.Second, Ratio: r, MinCalls: minCalls, Window: window}
}

// A host failing 60% of calls, never more than two in a row, opens a ratio
// circuit once MinCalls calls were made, and never a consecutive one.
func TestRatioOpensWhereConsecutiveDoesNot(t *testing.T) {
	pattern := []Outcome{Failure, Success, Failure, Failure, Success} // 60% failures
	run := func(s *Settings) (opened int) {
		clk := newClock()
		c := New(s, nil)
		for i := range 100 {
			tk, ok := c.Allow(clk.now)
			if !ok {
				return i
			}
			c.Report(tk, pattern[i%len(pattern)], clk.now)
			clk.advance(100 * time.Millisecond)
		}
		return -1
	}
	if n := run(settings(3, 1, 5*time.Second)); n != -1 {
		t.Errorf("the consecutive rule (3) opened after %d calls", n)
	}
	// Call 20 (the 21st) is the first failure reported with 20 calls in
	// the window: it opens the circuit, and call 21 is refused.
	if n := run(ratio(0.5, 20, 30*time.Second)); n != 21 {
		t.Errorf("the ratio rule (50%% of at least 20) refused call %d, want 21", n)
	}
	if n := run(ratio(0.7, 20, 30*time.Second)); n != -1 {
		t.Errorf("the ratio rule (70%%) opened after %d calls at 60%% failures", n)
	}
}

// Outcomes older than the window no longer count: failures spread thinner
// than MinCalls per window never open the circuit.
func TestRatioWindowRolls(t *testing.T) {
	clk := newClock()
	c := New(ratio(0.5, 10, 10*time.Second), nil)
	for i := range 200 {
		tk := mustAllow(t, c, clk.now)
		c.Report(tk, Failure, clk.now)
		clk.advance(1500 * time.Millisecond) // at most 7 calls per window
		if c.State(clk.now) != Closed {
			t.Fatalf("opened after %d calls spread over %v", i+1, 1500*time.Millisecond*time.Duration(i+1))
		}
	}
	// Failures closer together do, once the window holds MinCalls.
	for range 10 {
		tk, ok := c.Allow(clk.now)
		if !ok {
			break
		}
		c.Report(tk, Failure, clk.now)
	}
	if s := c.State(clk.now); s != Open {
		t.Fatalf("state %v after 10 more failures in one instant, want open", s)
	}
}

// Probes that close the circuit clear the window: the next failure does
// not reopen it at once.
func TestRatioWindowClearsOnClose(t *testing.T) {
	clk := newClock()
	var rec recorder
	c := New(ratio(0.5, 4, 30*time.Second), rec.on)
	for range 4 {
		c.Report(mustAllow(t, c, clk.now), Failure, clk.now)
	}
	clk.advance(6 * time.Second)
	c.Report(mustAllow(t, c, clk.now), Success, clk.now) // the probe
	if c.State(clk.now) != Closed || !c.Idle() {
		t.Fatalf("state %v, idle %v after the probe", c.State(clk.now), c.Idle())
	}
	c.Report(mustAllow(t, c, clk.now), Failure, clk.now)
	if s := c.State(clk.now); s != Closed {
		t.Fatalf("one failure after closing: %v", s)
	}
	if c.Idle() {
		t.Fatal("a circuit counting a failure is not idle")
	}
	if want := []string{"closed->open", "open->half-open", "half-open->closed"}; len(rec.log) != 3 || rec.log[2] != want[2] {
		t.Fatalf("transitions %v, want %v", rec.log, want)
	}
}

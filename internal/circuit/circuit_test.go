package circuit

import (
	"fmt"
	"sync"
	"testing"
	"time"
)

// clock is a fake time source.
type clock struct{ t time.Time }

func (c *clock) now() time.Time          { return c.t }
func (c *clock) advance(d time.Duration) { c.t = c.t.Add(d) }
func newClock() *clock                   { return &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)} }
func noClock() time.Time                 { panic("the closed path must not read the clock") }
func settings(f, p uint32, d time.Duration) *Settings {
	return &Settings{Failures: f, Probes: p, OpenFor: d}
}

type recorder struct {
	mu  sync.Mutex
	log []string
}

func (r *recorder) on(from, to State) {
	r.mu.Lock()
	r.log = append(r.log, fmt.Sprintf("%v->%v", from, to))
	r.mu.Unlock()
}

func (s State) String() string { return [...]string{"closed", "half-open", "open"}[s] }

func mustAllow(t *testing.T, c *Circuit, now func() time.Time) Ticket {
	t.Helper()
	tk, ok := c.Allow(now)
	if !ok {
		t.Fatalf("Allow refused in state %v", c.State(now))
	}
	return tk
}

// The transitions of gobreaker's two-step breaker, in the order its tests
// check them.
func TestTransitions(t *testing.T) {
	clk := newClock()
	var rec recorder
	c := New(settings(3, 2, 10*time.Second), rec.on)

	// Closed: failures count, a success resets them; no clock is read.
	for range 2 {
		c.Report(mustAllow(t, c, noClock), Failure, clk.now)
	}
	c.Report(mustAllow(t, c, noClock), Success, noClock)
	if !c.Idle() {
		t.Fatal("a success must reset the consecutive failures")
	}
	for range 2 {
		c.Report(mustAllow(t, c, noClock), Failure, clk.now)
	}
	if got := c.State(clk.now); got != Closed {
		t.Fatalf("after 2 of 3 failures: %v", got)
	}
	c.Report(mustAllow(t, c, noClock), Failure, clk.now)
	if got := c.State(clk.now); got != Open {
		t.Fatalf("after 3 consecutive failures: %v", got)
	}

	// Open: refused until OpenFor has passed, boundary included.
	clk.advance(10 * time.Second)
	if _, ok := c.Allow(clk.now); ok {
		t.Fatal("allowed at the last instant of the open period")
	}
	clk.advance(time.Nanosecond)

	// Half-open: Probes attempts, no more; all must succeed.
	p1 := mustAllow(t, c, clk.now)
	p2 := mustAllow(t, c, clk.now)
	if _, ok := c.Allow(clk.now); ok {
		t.Fatal("a third probe was allowed with Probes 2")
	}
	c.Report(p1, Success, clk.now)
	if got := c.State(clk.now); got != HalfOpen {
		t.Fatalf("after 1 of 2 probe successes: %v", got)
	}
	c.Report(p2, Success, clk.now)
	if got := c.State(clk.now); got != Closed {
		t.Fatalf("after 2 probe successes: %v", got)
	}

	want := []string{"closed->open", "open->half-open", "half-open->closed"}
	if fmt.Sprint(rec.log) != fmt.Sprint(want) {
		t.Fatalf("transitions %v, want %v", rec.log, want)
	}
}

func TestHalfOpenFailureReopens(t *testing.T) {
	clk := newClock()
	c := New(settings(1, 3, time.Second), nil)
	c.Report(mustAllow(t, c, clk.now), Failure, clk.now)
	clk.advance(2 * time.Second)
	probe := mustAllow(t, c, clk.now)
	c.Report(probe, Failure, clk.now)
	if got := c.State(clk.now); got != Open {
		t.Fatalf("a failed probe: %v, want open", got)
	}
	if _, ok := c.Allow(clk.now); ok {
		t.Fatal("allowed right after reopening")
	}
	clk.advance(1001 * time.Millisecond)
	mustAllow(t, c, clk.now)
}

func TestExcludedFreesProbeSlotAndCountsNothing(t *testing.T) {
	clk := newClock()
	c := New(settings(2, 1, time.Second), nil)
	tk := mustAllow(t, c, noClock)
	c.Report(tk, Failure, clk.now)
	c.Report(mustAllow(t, c, noClock), Excluded, noClock)
	c.Report(mustAllow(t, c, noClock), Failure, clk.now)
	if got := c.State(clk.now); got != Open {
		t.Fatalf("exclusions between failures keep them consecutive: %v", got)
	}
	clk.advance(2 * time.Second)
	probe := mustAllow(t, c, clk.now)
	if _, ok := c.Allow(clk.now); ok {
		t.Fatal("second probe allowed with Probes 1")
	}
	c.Report(probe, Excluded, clk.now)
	probe = mustAllow(t, c, clk.now) // the slot is free again
	c.Report(probe, Success, clk.now)
	if got := c.State(clk.now); got != Closed {
		t.Fatalf("%v, want closed", got)
	}
}

// A result from an earlier generation is dropped: a slow attempt allowed
// while closed must not count against the circuit after it reopened and
// closed again, nor close a half-open one.
func TestLateResultsDropped(t *testing.T) {
	clk := newClock()
	c := New(settings(1, 1, time.Second), nil)
	slow := mustAllow(t, c, noClock)
	c.Report(mustAllow(t, c, noClock), Failure, clk.now) // opens
	clk.advance(2 * time.Second)
	probe := mustAllow(t, c, clk.now)
	c.Report(slow, Success, clk.now) // late, from the closed generation
	if got := c.State(clk.now); got != HalfOpen {
		t.Fatalf("a late success changed the state: %v", got)
	}
	c.Report(probe, Success, clk.now)
	c.Report(slow, Failure, clk.now) // late failure after closing again
	if got := c.State(clk.now); got != Closed {
		t.Fatalf("a late failure changed the state: %v", got)
	}
	if !c.Idle() {
		t.Fatal("a late failure was counted")
	}
}

// Many goroutines failing at once open the circuit exactly once.
func TestConcurrentFailuresTripOnce(t *testing.T) {
	clk := &clock{t: time.Now()}
	var rec recorder
	c := New(settings(50, 1, time.Hour), rec.on)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				if tk, ok := c.Allow(clk.now); ok {
					c.Report(tk, Failure, clk.now)
				}
			}
		})
	}
	wg.Wait()
	if len(rec.log) != 1 || rec.log[0] != "closed->open" {
		t.Fatalf("transitions %v, want one closed->open", rec.log)
	}
}

func BenchmarkClosedSuccess(b *testing.B) {
	c := New(settings(5, 1, time.Second), nil)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			tk, _ := c.Allow(time.Now)
			c.Report(tk, Success, time.Now)
		}
	})
}

// Quiet says a success can be left unreported only when reporting it
// would change nothing: a closed circuit, no failure counted, no ratio
// rule. Each other case must be reported.
func TestQuiet(t *testing.T) {
	clk := newClock()
	c := New(settings(2, 1, time.Second), nil)
	tk := mustAllow(t, c, noClock)
	if !c.Quiet(tk) {
		t.Error("closed, nothing counted: Quiet is false")
	}
	c.Report(tk, Failure, clk.now)
	if c.Quiet(tk) {
		t.Error("a failure is counted: a success resets it: Quiet is true")
	}
	c.Report(mustAllow(t, c, noClock), Success, noClock)
	if !c.Quiet(tk) {
		t.Error("the success reset the count: Quiet is false")
	}

	c.Report(mustAllow(t, c, noClock), Failure, clk.now)
	c.Report(mustAllow(t, c, noClock), Failure, clk.now) // opens
	clk.advance(2 * time.Second)
	probe := mustAllow(t, c, clk.now) // half-open
	if c.Quiet(probe) {
		t.Error("a probe's success closes the circuit: Quiet is true")
	}

	s := settings(0, 1, time.Second)
	s.Ratio, s.MinCalls, s.Window = 0.5, 1, time.Minute
	r := New(s, nil)
	if r.Quiet(mustAllow(t, r, noClock)) {
		t.Error("the ratio rule counts every success: Quiet is true")
	}
}

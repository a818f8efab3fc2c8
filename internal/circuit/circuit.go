// Package circuit is a circuit breaker's state machine with gobreaker's
// semantics (consecutive failures trip it, an open period fails fast, a few
// half-open probes decide, a generation drops late results of an earlier
// state), a failure-ratio rule over a rolling window as
// Microsoft.Extensions.Http.Resilience and Polly have, and a lock-free
// closed path: while closed, allowing an attempt is one atomic load and
// reporting a success or a failure one atomic compare-and-swap, with no
// clock read (the ratio rule adds one clock read and one compare-and-swap
// on the window's bucket). The lock is taken only on
// transitions and in the open and half-open states. Time is passed in, so
// retryhttp.Breaker and the retrystorm simulator share it.
package circuit

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/retryhttp/retryhttp/internal/window"
)

// State is a circuit's state; the values are retryhttp.CircuitState's.
type State uint8

const (
	Closed State = iota
	HalfOpen
	Open
)

// Outcome is what an allowed attempt reports.
type Outcome uint8

const (
	// Success closes a half-open circuit (after Probes of them) and resets
	// the consecutive failures of a closed one.
	Success Outcome = iota
	// Failure counts toward tripping a closed circuit and reopens a
	// half-open one.
	Failure
	// Excluded says nothing about the host (the caller gave up): it is not
	// counted, and frees its half-open probe slot.
	Excluded
)

// Settings are a circuit's thresholds; the caller resolves defaults. At
// least one of Failures and Ratio is set; with both, either rule opens the
// circuit.
type Settings struct {
	Failures uint32        // consecutive failures that open the circuit, 0..MaxFailures; 0: no such rule
	Probes   uint32        // half-open attempts, all of which must succeed to close
	OpenFor  time.Duration // how long an open circuit fails fast

	// Ratio, if above 0, opens the circuit when failures make at least
	// this share of the calls in the last Window, once there are at least
	// MinCalls of them.
	Ratio    float64
	MinCalls uint32
	Window   time.Duration
}

// The packed word: generation | state | consecutive failures.
const (
	failBits   = 22
	stateShift = failBits
	genShift   = failBits + 2
	failMask   = 1<<failBits - 1
	// MaxFailures is the largest Settings.Failures a circuit can count to.
	MaxFailures = failMask
)

func stateOf(w uint64) State          { return State(w >> stateShift & 3) }
func genOf(w uint64) uint64           { return w >> genShift }
func failsOf(w uint64) uint32         { return uint32(w & failMask) }
func pack(gen uint64, s State) uint64 { return gen<<genShift | uint64(s)<<stateShift }

// Circuit is one host's breaker. The zero value is not usable; use New. It
// is safe for concurrent use.
type Circuit struct {
	word     atomic.Uint64
	settings *Settings
	ratio    *window.Window       // the failure-ratio rule's counts, hits being failures; nil without the rule
	onChange func(from, to State) // called after a transition, outside the lock

	mu        sync.Mutex
	openUntil time.Time // guarded by mu
	probes    uint32    // half-open attempts allowed; guarded by mu
	successes uint32    // half-open successes; guarded by mu
}

// New returns a closed circuit. settings is shared, not copied, and must
// not change; onChange may be nil.
func New(settings *Settings, onChange func(from, to State)) *Circuit {
	c := &Circuit{settings: settings, onChange: onChange}
	if settings.Ratio > 0 {
		c.ratio = window.New(settings.Window)
	}
	return c
}

// Ticket is what Allow hands out and Report takes back: the generation and
// state the attempt was allowed in.
type Ticket struct {
	gen   uint64
	state State
}

// Allow asks for one attempt. now is read only when the circuit is not
// closed.
func (c *Circuit) Allow(now func() time.Time) (Ticket, bool) {
	w := c.word.Load()
	if stateOf(w) == Closed {
		return Ticket{gen: genOf(w), state: Closed}, true
	}
	t := now()
	c.mu.Lock()
	from, to, changed := c.expireLocked(t)
	w = c.word.Load()
	tk, ok := Ticket{gen: genOf(w), state: stateOf(w)}, false
	switch tk.state {
	case Closed:
		ok = true
	case HalfOpen:
		if c.probes < c.settings.Probes {
			c.probes++
			ok = true
		}
	}
	c.mu.Unlock()
	c.notify(from, to, changed)
	return tk, ok
}

// Quiet reports whether a success admitted with tk would change nothing,
// so that its Report can be left out: it was admitted while closed, there
// is no failure-ratio rule, and no consecutive failure is counted. It is
// the common case, and small enough to be inlined into the caller, which
// asks it before Report (Report would find the same, a call later).
func (c *Circuit) Quiet(tk Ticket) bool {
	return tk.state == Closed && c.ratio == nil && failsOf(c.word.Load()) == 0
}

// Report records the outcome of an attempt Allow let through. A ticket from
// an earlier generation is ignored: the circuit has moved on.
func (c *Circuit) Report(tk Ticket, o Outcome, now func() time.Time) {
	if tk.state == Closed {
		c.reportClosed(tk.gen, o, now)
		return
	}
	c.mu.Lock()
	w := c.word.Load()
	var from, to State
	changed := false
	if genOf(w) == tk.gen && stateOf(w) == HalfOpen {
		switch o {
		case Success:
			c.successes++
			if c.successes >= c.settings.Probes {
				from, to, changed = c.setLocked(Closed, time.Time{})
			}
		case Failure:
			from, to, changed = c.setLocked(Open, now())
		case Excluded:
			c.probes--
		}
	}
	c.mu.Unlock()
	c.notify(from, to, changed)
}

func (c *Circuit) reportClosed(gen uint64, o Outcome, now func() time.Time) {
	if c.ratio != nil && o != Excluded && genOf(c.word.Load()) == gen {
		t := now()
		c.ratio.Add(o == Failure, t)
		if o == Failure {
			if f, n := c.ratio.Sums(t); n >= uint64(c.settings.MinCalls) && float64(f) >= c.settings.Ratio*float64(n) {
				c.trip(gen, t)
				return
			}
		}
	}
	if c.settings.Failures == 0 {
		return
	}
	for {
		w := c.word.Load()
		if genOf(w) != gen || stateOf(w) != Closed {
			return
		}
		var next uint64
		switch o {
		case Success:
			if failsOf(w) == 0 {
				return // the common case: nothing to write
			}
			next = w &^ failMask
		case Failure:
			if failsOf(w)+1 >= c.settings.Failures {
				c.trip(gen, now())
				return
			}
			next = w + 1
		default:
			return
		}
		if c.word.CompareAndSwap(w, next) {
			return
		}
	}
}

// trip opens a closed circuit of generation gen.
func (c *Circuit) trip(gen uint64, now time.Time) {
	c.mu.Lock()
	var from, to State
	changed := false
	if w := c.word.Load(); genOf(w) == gen && stateOf(w) == Closed {
		from, to, changed = c.setLocked(Open, now)
	}
	c.mu.Unlock()
	c.notify(from, to, changed)
}

// State returns the circuit's state at now; an open circuit whose open
// period has ended turns half-open.
func (c *Circuit) State(now func() time.Time) State {
	w := c.word.Load()
	if stateOf(w) != Open {
		return stateOf(w)
	}
	c.mu.Lock()
	from, to, changed := c.expireLocked(now())
	s := stateOf(c.word.Load())
	c.mu.Unlock()
	c.notify(from, to, changed)
	return s
}

// Idle reports whether the circuit holds no information: closed, with no
// failure counted. Forgetting an idle circuit loses nothing.
func (c *Circuit) Idle() bool {
	w := c.word.Load()
	return stateOf(w) == Closed && failsOf(w) == 0 && (c.ratio == nil || !c.ratio.Hit())
}

// expireLocked turns an open circuit whose period ended half-open. The open
// period includes its last instant. c.mu must be held.
func (c *Circuit) expireLocked(now time.Time) (from, to State, changed bool) {
	if stateOf(c.word.Load()) == Open && now.After(c.openUntil) {
		return c.setLocked(HalfOpen, now)
	}
	return 0, 0, false
}

// setLocked moves to state s in a new generation, with no failure counted.
// The closed path may be changing the failure count concurrently, hence the
// compare-and-swap loop. c.mu must be held.
func (c *Circuit) setLocked(s State, now time.Time) (from, to State, changed bool) {
	for {
		w := c.word.Load()
		if c.word.CompareAndSwap(w, pack(genOf(w)+1, s)) {
			from = stateOf(w)
			break
		}
	}
	switch s {
	case Closed:
		if c.ratio != nil {
			c.ratio.Reset() // the probes found the host well: its old failures are history
		}
	case Open:
		c.openUntil = now.Add(c.settings.OpenFor)
	case HalfOpen:
		c.probes, c.successes = 0, 0
	}
	return from, s, true
}

func (c *Circuit) notify(from, to State, changed bool) {
	if changed && c.onChange != nil {
		c.onChange(from, to)
	}
}

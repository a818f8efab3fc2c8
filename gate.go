package retryhttp

import (
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/retryhttp/retryhttp/internal/circuit"
)

// gate is one RoundTrip's brakes, asked in one order by the attempt loop
// and by the hedging race alike: before a retry's wait, the Budget
// (withdraw); before each attempt, the Throttle and then the Breaker
// (allow); after each attempt, the Breaker and the Throttle are told how
// it ended (report). A brake added is a field here and a line in allow and
// report, not an edit of the loop. Its host's state is looked up once per
// RoundTrip (Transport.gateFor).
type gate struct {
	budget   *Budget
	circuit  *hostCircuit  // nil: no Breaker
	throttle *hostThrottle // nil: no Throttle
	k        float64       // the Throttle's K, its default resolved by the lookup
}

// allow admits an attempt about to be sent at at, or names the brake
// that refused it. at is read only by the Throttle (see readsTime).
func (g *gate) allow(at time.Time) (circuit.Ticket, Reason, error) {
	if g.throttle != nil {
		if err := g.throttle.allow(g.k, at, rand.Float64); err != nil {
			return circuit.Ticket{}, ReasonThrottled, err
		}
	}
	if g.circuit != nil {
		tk, err := g.circuit.allow()
		if err != nil {
			return tk, ReasonCircuitOpen, err
		}
		return tk, ReasonNone, nil
	}
	return circuit.Ticket{}, ReasonNone, nil
}

// report tells the per-host brakes how an attempt they allowed ended; r
// says what counts as the host accepting it.
func (g *gate) report(r *rules, a *sentAttempt) {
	if g.circuit != nil {
		g.circuit.report(a)
	}
	if g.throttle != nil {
		g.throttle.report(r, a)
	}
}

// readsTime reports whether allow reads the send time it is given.
func (g *gate) readsTime() bool { return g.throttle != nil }

// perHost reports whether a brake may refuse the next attempt to the host.
func (g *gate) perHost() bool { return g.circuit != nil || g.throttle != nil }

// sentAttempt is one attempt as the brakes are told of it: the ticket the
// Breaker admitted it with, its request and outcome, when it was sent, and
// the clock read when it ended, once, and only if needed (a success is
// counted at its send time): the brakes share one reading.
type sentAttempt struct {
	ticket circuit.Ticket
	req    *http.Request
	resp   *http.Response
	err    error
	sent   time.Duration // when it was sent, on mono's clock
	at     time.Time     // the same as a time, if the caller made one (a Throttle reads it); zero otherwise
	clock  onceClock
	now    func() time.Time // nil: clock; a test's own clock otherwise
}

// sentAt is when the attempt was sent, as a time: made from mono's
// reading only where no caller made it (a time.Time is dearer to make
// than the reading, and the Breaker's common case reads none).
func (a *sentAttempt) sentAt() time.Time {
	if a.at.IsZero() {
		return monoBase.Add(a.sent)
	}
	return a.at
}

// ended returns when the attempt ended.
func (a *sentAttempt) ended() time.Time {
	if a.now != nil {
		return a.now()
	}
	return a.clock.now()
}

package retryhttp

import (
	"math/rand/v2"
	"time"

	"github.com/retryhttp/retryhttp/internal/circuit"
)

// brakes are the per-host brakes of one RoundTrip, asked in one order
// before each send and told of each outcome after it, by the attempt loop
// and by the hedging race alike: the Throttle (may this host be sent
// anything now?), then the Breaker (is its circuit closed, or is this the
// half-open probe?). The Budget, which bounds retries rather than sends, is
// asked by the loop after a retryable failure and by the race before a
// hedge. A nil field is a brake that is off. The zero brakes allow every
// send and count nothing.
type brakes struct {
	throttle *hostThrottle
	circuit  *hostCircuit
	k        float64 // the Throttle's K
	rules    rules   // the Transport's: what is retried, and what counts as accepted
}

// admit asks the brakes whether an attempt may be sent at at, the
// attempt's send time: the circuit's ticket to report it with, or the
// Reason it may not be sent and the error that says so.
func (b *brakes) admit(at time.Time) (circuit.Ticket, Reason, error) {
	if b.throttle != nil {
		if err := b.throttle.allow(b.k, at, rand.Float64); err != nil {
			return circuit.Ticket{}, ReasonThrottled, err
		}
	}
	if b.circuit != nil {
		tk, err := b.circuit.allow()
		if err != nil {
			return tk, ReasonCircuitOpen, err
		}
		return tk, ReasonNone, nil
	}
	return circuit.Ticket{}, ReasonNone, nil
}

// report tells the brakes the outcome of an attempt admit let through with
// tk, sent at sent: a success counts at its send time, with no clock read
// on the healthy path, anything else at its end, one reading (now) shared.
func (b *brakes) report(tk circuit.Ticket, o outcome, sent time.Time, now func() time.Time) {
	if b.circuit != nil {
		b.circuit.report(tk, o, sent, now)
	}
	if b.throttle != nil {
		b.throttle.report(&b.rules, o, sent, now)
	}
}

// any reports whether a brake is on: a response kept across a wait may
// then have to be returned, should the next attempt be refused.
func (b *brakes) any() bool { return b.throttle != nil || b.circuit != nil }

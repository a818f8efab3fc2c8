package retryhttp

import (
	"context"
	"net/http"
	"time"

	"github.com/retryhttp/retryhttp/internal/circuit"
	"github.com/retryhttp/retryhttp/overload"
)

// gate is one RoundTrip's brakes, asked in one order by the attempt loop
// and by the hedging race alike: before a retry's wait, the Budget
// (withdraw); before each attempt, the per-host brakes in their order
// (allow); after each attempt, the same brakes are told how it ended
// (report). Their host's entries are looked up once per RoundTrip, for
// all the brakes at once (hostBrakes).
type gate struct {
	budget  *Budget
	brakes  []brake      // the host's entries, in order: the Limit, the Throttle, the Breaker
	circuit *hostCircuit // the Breaker's entry, also asked before a wait whether it is open; nil: no Breaker
	// readsTime says whether a brake reads the send time it is given (the
	// Throttle): a time.Time is made for it only then.
	readsTime bool
}

// brake is a per-host brake: asked before each attempt to its host, and
// told how an attempt it let through ended. A brake added is a type with
// these methods and a place in lookUpHost's order, not an edit of the
// loop.
//
// The order: the concurrency Limit first, because its caller may wait in
// its queue, so that the Throttle and the Breaker then judge the host as it
// is when the attempt is sent, and no Breaker ticket is held by a caller
// that waits; the Breaker last, since a ticket it gives out is a half-open
// probe's slot.
type brake interface {
	// allow admits a, about to be sent at a.at, keeping in a what report
	// needs, or names the reason it refuses it. A caller may wait for
	// room if wait is set (a hedge may not: it is sent only if there is
	// room).
	allow(ctx context.Context, a *sentAttempt, wait bool) (Reason, error)
	// undo gives back what allow took, for an attempt a later brake
	// refused.
	undo(a *sentAttempt)
	// report tells the brake how an attempt it allowed ended; r says what
	// counts as the host accepting it.
	report(r *rules, a *sentAttempt)
}

// allow admits attempt a, or names the brake that refused it, having
// undone what the brakes before it took. The caller's a is filled in
// place: an attempt's state is built once, on its stack, for allow and
// report.
func (g *gate) allow(ctx context.Context, a *sentAttempt, wait bool) (Reason, error) {
	for i, b := range g.brakes {
		if reason, err := b.allow(ctx, a, wait); reason != ReasonNone {
			for _, before := range g.brakes[:i] {
				before.undo(a)
			}
			return reason, err
		}
	}
	return ReasonNone, nil
}

// report tells the brakes how an attempt they allowed ended.
func (g *gate) report(r *rules, a *sentAttempt) {
	for _, b := range g.brakes {
		b.report(r, a)
	}
}

// perHost reports whether a brake may refuse the next attempt to the host.
func (g *gate) perHost() bool { return len(g.brakes) > 0 }

// limitBrake is a host's concurrency limit as a brake.
type limitBrake struct{ l *overload.Limit }

func (b limitBrake) allow(ctx context.Context, a *sentAttempt, wait bool) (Reason, error) {
	var err error
	if wait {
		a.permit, err = b.l.Acquire(ctx)
	} else if p, ok := b.l.TryAcquire(ctx); ok {
		a.permit = p
	} else {
		err = overload.ErrLimited
	}
	switch {
	case err == overload.ErrLimited:
		return ReasonLimited, err
	case err != nil:
		return ReasonCanceled, err
	}
	return ReasonNone, nil
}

func (b limitBrake) undo(a *sentAttempt)             { a.permit.Cancel() }
func (b limitBrake) report(_ *rules, a *sentAttempt) { a.endPermit() }

// sentAttempt is one attempt as the brakes are told of it: the ticket the
// Breaker admitted it with, its request and outcome, when it was sent, and
// the clock read when it ended, once, and only if needed (a success is
// counted at its send time): the brakes share one reading.
type sentAttempt struct {
	ticket circuit.Ticket
	permit overload.Permit
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

// endPermit ends the attempt's Permit: a drop is a sign the host is
// overloaded (a network error or timeout, 429, 503, 504), and an attempt
// the caller abandoned teaches the limit nothing.
func (a *sentAttempt) endPermit() {
	switch {
	case a.err != nil && a.req.Context().Err() != nil:
		a.permit.Cancel()
	case a.err != nil:
		a.permit.Done(true)
	default:
		code := a.resp.StatusCode
		a.permit.Done(code == http.StatusTooManyRequests || code == http.StatusServiceUnavailable || code == http.StatusGatewayTimeout)
	}
}

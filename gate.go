package retryhttp

import (
	"context"
	"math/rand/v2"
	"net/http"
	"net/url"
	"sync/atomic"
	"time"

	"github.com/retryhttp/retryhttp/internal/circuit"
	"github.com/retryhttp/retryhttp/overload"
)

// gate is one RoundTrip's brakes, asked in one order by the attempt loop
// and by the hedging race alike: before a retry's wait, the Budget
// (withdraw); before each attempt, the Pacer, then the concurrency Limit,
// then the Throttle, then the Breaker (allow); after each attempt, the
// Pacer, the Limit, the Breaker and the Throttle are told how it ended
// (report). The Pacer is asked first because its caller may wait for the
// host's quota, and holds no other brake's permit meanwhile; the Limit
// next because its caller may wait in its queue: the Throttle and
// the Breaker then judge the host as it is when the attempt is sent, and
// no Breaker ticket is held by a caller that waits. A brake added is a field here and a line in allow and
// report, not an edit of the loop. Its host's state is looked up once per
// RoundTrip, for all the brakes at once (hostBrakes).
type gate struct {
	budget   *Budget
	circuit  *hostCircuit    // nil: no Breaker
	throttle *hostThrottle   // nil: no Throttle
	k        float64         // the Throttle's K, its default resolved by the lookup
	limit    *overload.Limit // nil: no Limit
	pace     *hostPace       // nil: no Pacer
}

// allow admits attempt a, about to be sent at a.at, and gives it the
// Breaker's ticket and the Limit's permit that its report hands back; or
// names the brake that refused it. a.at is read only by the Throttle (see
// readsTime). A caller over the host's concurrency limit waits in its
// queue if wait is set (a hedge does not: it is sent only if there is
// room). The caller's a is filled in place: an attempt's state is built
// once, on its stack, for allow and report.
func (g *gate) allow(ctx context.Context, a *sentAttempt, wait bool) (Reason, error) {
	if g.pace != nil {
		if r, err := g.pace.allow(ctx, wait, &a.paceSeq); r != ReasonNone {
			return r, err
		}
	}
	if g.limit != nil {
		var err error
		if wait {
			a.permit, err = g.limit.Acquire(ctx)
		} else if p, ok := g.limit.TryAcquire(ctx); ok {
			a.permit = p
		} else {
			err = overload.ErrLimited
		}
		switch {
		case err == overload.ErrLimited:
			g.unpace(a.paceSeq)
			return ReasonLimited, err
		case err != nil:
			g.unpace(a.paceSeq)
			return ReasonCanceled, err
		}
	}
	if g.throttle != nil {
		if err := g.throttle.allow(g.k, a.at, rand.Float64); err != nil {
			a.permit.Cancel()
			g.unpace(a.paceSeq)
			return ReasonThrottled, err
		}
	}
	if g.circuit != nil {
		var ok bool
		if a.ticket, ok = g.circuit.allow(); !ok {
			a.permit.Cancel()
			g.unpace(a.paceSeq)
			return ReasonCircuitOpen, g.circuit.refused()
		}
	}
	return ReasonNone, nil
}

// report tells the per-host brakes how an attempt they allowed ended; r
// says what counts as the host accepting it.
func (g *gate) report(r *rules, a *sentAttempt) {
	if g.pace != nil {
		g.pace.report(a.resp, a.paceSeq)
	}
	if g.limit != nil {
		a.endPermit()
	}
	if g.circuit != nil {
		g.circuit.report(a)
	}
	if g.throttle != nil {
		g.throttle.report(r, a)
	}
}

// unpace gives the Pacer back a request a later brake refused.
func (g *gate) unpace(seq int64) {
	if g.pace != nil {
		g.pace.cancel(seq)
	}
}

// readsTime reports whether allow reads the send time it is given.
func (g *gate) readsTime() bool { return g.throttle != nil }

// perHost reports whether a brake may refuse the next attempt to the host.
func (g *gate) perHost() bool {
	return g.circuit != nil || g.throttle != nil || g.limit != nil || g.pace != nil
}

// sentAttempt is one attempt as the brakes are told of it: the ticket the
// Breaker admitted it with, its request and outcome, when it was sent, and
// the clock read when it ended, once, and only if needed (a success is
// counted at its send time): the brakes share one reading.
type sentAttempt struct {
	ticket circuit.Ticket
	permit overload.Permit
	// paceSeq is the Pacer's number for the attempt's admission.
	paceSeq int64
	req     *http.Request
	resp    *http.Response
	err     error
	sent    time.Duration // when it was sent, on mono's clock
	at      time.Time     // the same as a time, if the caller made one (a Throttle reads it); zero otherwise
	clock   onceClock
	now     func() time.Time // nil: clock; a test's own clock otherwise
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

// lastHost is what the per-host brakes (the Breaker's circuits, the
// Throttle's counts, the Limiter's limits) gave a Transport for the last
// host it called: most clients call one host, and finding the entries
// again costs one load and two string comparisons for all the brakes,
// instead of parsing the URL's host and hashing it once per brake.
type lastHost struct {
	brakes              // whose entries these are
	scheme, host string // as in the URL

	circuit *hostCircuit    // nil: no Breaker
	counts  *hostThrottle   // nil: no Throttle
	limit   *overload.Limit // nil: no Limiter
	pace    *hostPace       // nil: no Pacer
}

// brakes are a Transport's per-host brakes, each nil when unset.
type brakes struct {
	breaker  *Breaker
	throttle *Throttle
	limiter  *overload.Limiter
	pacer    *Pacer
}

// hostBrakes returns u's host's entries in b's brakes, through cache.
func hostBrakes(cache *atomic.Pointer[lastHost], b brakes, u *url.URL) *lastHost {
	if c := cache.Load(); c != nil && c.brakes == b && c.host == u.Host && c.scheme == u.Scheme && c.fresh() {
		if c.circuit != nil && !c.circuit.used.Load() {
			c.circuit.used.Store(true)
		}
		return c
	}
	return lookUpHost(cache, b, u)
}

// lookUpHost is hostBrakes past its cache: u's host is looked up in each
// brake, and the result cached.
func lookUpHost(cache *atomic.Pointer[lastHost], b brakes, u *url.URL) *lastHost {
	c := &lastHost{brakes: b, scheme: u.Scheme, host: u.Host}
	if b.breaker != nil {
		c.circuit = b.breaker.circuitFor(hostOf(u))
	}
	if b.throttle != nil {
		c.counts = b.throttle.host(u)
	}
	if b.limiter != nil {
		c.limit = b.limiter.For(u.Scheme + "://" + u.Host)
	}
	if b.pacer != nil {
		c.pace = b.pacer.host(u)
	}
	cache.Store(c)
	return c
}

// fresh reports whether no brake has forgotten its entry since it was
// cached: a forgotten entry is no longer the one the brake's other
// callers share.
func (c *lastHost) fresh() bool {
	return (c.circuit == nil || !c.circuit.evicted.Load()) &&
		(c.counts == nil || !c.counts.evicted.Load()) &&
		(c.limit == nil || !c.limit.Forgotten())
}

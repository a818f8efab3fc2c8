package retryhttp

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/retryhttp/retryhttp/internal/circuit"
	"github.com/retryhttp/retryhttp/internal/defaults"
	"github.com/retryhttp/retryhttp/overload"
)

// Hedging sends a second copy of a request that is slow to answer, as
// "The Tail at Scale" (Dean and Barroso, CACM 2013) describes: after
// Delay with no response, another copy goes out; the first usable
// response wins, and the other copies are cancelled and their bodies
// closed. It cuts the latency of the slowest requests for a few per cent
// more of them.
//
// Set Transport.Hedge to turn it on; nil, the default, hedges nothing. The
// zero Hedging hedges safe requests once, after the host's 95th
// percentile of latency, once 20 of its latencies are known.
//
// What is hedged: requests whose method is safe (GET, HEAD, OPTIONS,
// TRACE) and whose body can be sent again; with Unsafe, also idempotent
// ones (PUT, DELETE) and those carrying an Idempotency-Key. Never a POST
// or PATCH without a key. Against the idempotency middleware a keyed copy
// sent while the first still runs is answered 409 (in flight), which is
// not usable: the race waits for the first, so hedging a keyed POST saves
// time only when the first copy was lost on the way.
//
// What bounds it: each hedge is an attempt, counted against
// Policy.MaxAttempts with the retries (a hedge and a retry never
// multiply), sent under the same deadline; each withdraws from the retry
// Budget, and none is sent when the Budget is empty, or the Throttle or
// the Breaker refuses it. A usable response is one the Transport would not retry; when every
// copy failed, the last to fail is the attempt's outcome, and the retry
// rules take it from there.
//
// A Hedging with a field out of range (a negative Delay or MaxHedges, a
// Quantile outside [0, 1)) fails every RoundTrip of its Transport, hedged
// or not, with an error that names the field, nothing sent.
//
// A Hedging is safe for concurrent use and may be shared by Transports
// (the latencies it learns are per host). It must not be copied after
// first use.
type Hedging struct {
	// Delay is how long an attempt runs without a response before a hedge
	// is sent. 0 means the host's Quantile latency.
	Delay time.Duration
	// Quantile is the share of the host's latencies below the delay, when
	// Delay is 0: 0.95 sends a hedge for the slowest 5%. 0 means
	// 0.95.
	Quantile float64
	// MaxHedges is how many copies may be sent besides the first, one
	// Delay apart. 0 means 1.
	MaxHedges int
	// Unsafe also hedges idempotent methods and keyed requests.
	Unsafe bool

	hosts sync.Map     // hostID -> *latencies
	n     atomic.Int64 // hosts tracked
}

// Bounds of the latencies Hedging learns.
const (
	hedgeMinSamples = 20   // latencies of a host known before its quantile is used
	hedgeMaxHosts   = 1024 // hosts whose latencies are kept; past it one is forgotten
)

// Validate reports the first field out of range. RoundTrip validates
// too, and fails every request with its error, hedged or not, as for an
// invalid Policy, so that a wrong setting shows on the first call, not
// on the first slow one; call Validate at start-up to learn of it
// before any request.
func (h *Hedging) Validate() error {
	switch {
	case h.Delay < 0:
		return fmt.Errorf("retryhttp: Hedging: Delay %v is negative", h.Delay)
	case !(h.Quantile >= 0 && h.Quantile < 1):
		return fmt.Errorf("retryhttp: Hedging: Quantile %v is not in [0, 1)", h.Quantile)
	case h.MaxHedges < 0:
		return fmt.Errorf("retryhttp: Hedging: MaxHedges %d is negative", h.MaxHedges)
	}
	return nil
}

// hedgeable reports whether a request may be hedged at all.
func (h *Hedging) hedgeable(method string, keyed, bodyReplayable bool) bool {
	if !bodyReplayable {
		return false
	}
	switch method {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
		return true
	case http.MethodPut, http.MethodDelete:
		return h.Unsafe
	}
	return h.Unsafe && keyed
}

// delay returns the wait before a hedge to u's host, and false while the
// host's latencies are not known well enough to hedge.
func (h *Hedging) delay(l *latencies) (time.Duration, bool) {
	if h.Delay > 0 {
		return h.Delay, true
	}
	q := h.Quantile
	if q == 0 {
		q = defaults.HedgeQuantile
	}
	return l.quantile(q)
}

func (h *Hedging) maxHedges() int {
	if h.MaxHedges == 0 {
		return defaults.MaxHedges
	}
	return h.MaxHedges
}

// latenciesOf returns the latencies learnt of u's host.
func (h *Hedging) latenciesOf(u *url.URL) *latencies {
	id := hostOf(u)
	if v, ok := h.hosts.Load(id); ok {
		return v.(*latencies)
	}
	if h.n.Load() >= hedgeMaxHosts {
		h.hosts.Range(func(k, _ any) bool { // forget any one
			if _, loaded := h.hosts.LoadAndDelete(k); loaded {
				h.n.Add(-1)
			}
			return false
		})
	}
	v, loaded := h.hosts.LoadOrStore(id, &latencies{})
	if !loaded {
		h.n.Add(1)
	}
	return v.(*latencies)
}

// latencies is a bounded sketch of one host's response times: counts in
// buckets 10% apart from 100 µs to about 3 minutes, halved whenever they
// reach latenciesDecay in all, so that what the host did lately weighs
// most. A quantile read from it is within 10% of the true one.
type latencies struct {
	counts [latencyBuckets]atomic.Uint32
	total  atomic.Uint32
	mu     sync.Mutex // serialises halving
}

const (
	latencyBuckets = 150
	latencyFloor   = 100 * time.Microsecond
	latencyGrowth  = 1.1
	latenciesDecay = 4096
)

var logGrowth = math.Log(latencyGrowth)

func latencyBucket(d time.Duration) int {
	if d <= latencyFloor {
		return 0
	}
	return min(latencyBuckets-1, int(math.Log(float64(d)/float64(latencyFloor))/logGrowth)+1)
}

// record adds one response time.
func (l *latencies) record(d time.Duration) {
	l.counts[latencyBucket(d)].Add(1)
	if l.total.Add(1) < latenciesDecay {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.total.Load() < latenciesDecay {
		return // halved meanwhile
	}
	var left uint32
	for i := range l.counts {
		for {
			c := l.counts[i].Load()
			if l.counts[i].CompareAndSwap(c, c/2) {
				left += c / 2
				break
			}
		}
	}
	l.total.Store(left)
}

// quantile returns the upper bound of the bucket holding the q quantile,
// and false with fewer than hedgeMinSamples latencies.
func (l *latencies) quantile(q float64) (time.Duration, bool) {
	total := l.total.Load()
	if total < hedgeMinSamples {
		return 0, false
	}
	want := uint32(math.Ceil(q * float64(total)))
	var seen uint32
	for i := range l.counts {
		if seen += l.counts[i].Load(); seen >= want {
			return time.Duration(float64(latencyFloor) * math.Pow(latencyGrowth, float64(i))), true
		}
	}
	return time.Duration(float64(latencyFloor) * math.Pow(latencyGrowth, latencyBuckets-1)), true
}

// copyResult is what one copy of a hedged attempt came back with.
type copyResult struct {
	req    *http.Request // as prepared, in the RoundTrip's context: what the retry rules judge
	sreq   *http.Request // as sent, with the copy's own context, cancelled when it lost
	n      int           // its attempt number
	resp   *http.Response
	err    error
	cancel context.CancelCauseFunc
	ticket circuit.Ticket
	permit overload.Permit
	// paceSeq is the Pacer's number for its admission.
	paceSeq int64
	sent    time.Duration // when it was sent, as mono reads it
	took    time.Duration
}

// race sends first, attempt n as the gate admitted it (admitted's ticket
// and permit), and hedges it: after delay with no usable response,
// another copy made by next (attempt n+1, n+2, ...), while the hedges
// allowed, the attempts left, the Budget and the Breaker permit. It returns the winning copy's
// request and outcome, or the last failed copy's, and how many copies it
// sent. Every copy's outcome is reported to the Breaker, the Throttle and
// the latencies; the losers are cancelled and their bodies closed.
//
// The request returned is the copy as prepared, in the RoundTrip's own
// context, not the copy's: the copy's context is cancelled once the race
// is over, and a failure must read as what it was (a reset, a timeout),
// not as the caller's cancellation.
func (r *raceParams) race(ctx context.Context, first *http.Request, n int, admitted *sentAttempt) (*http.Request, *http.Response, error, int) {
	results := make(chan copyResult, 1+r.maxHedges)
	cancels := make([]context.CancelCauseFunc, 0, 1+r.maxHedges)
	launch := func(areq *http.Request, n int, a *sentAttempt) {
		tk, pm, seq := a.ticket, a.permit, a.paceSeq
		cctx, cancel := context.WithCancelCause(areq.Context())
		cancels = append(cancels, cancel)
		// A copy is sent once: net/http's own resend of a copy with a body
		// is withheld (see wireSends), the race and the retries cover it.
		sreq, _ := traceSends(r.base, areq.WithContext(cctx), 1)
		go func() {
			start := mono()
			resp, err := send(r.via, sreq, r.attemptTimeout, r.exchangeTimeout)
			results <- copyResult{req: areq, sreq: sreq, n: n, resp: resp, err: err, cancel: cancel, ticket: tk, permit: pm, paceSeq: seq, sent: start, took: mono() - start}
		}()
	}
	launch(first, n, admitted)
	inflight, sent := 1, 1
	timer := time.NewTimer(r.delay)
	defer timer.Stop()
	var last *copyResult // the latest failed copy
	for {
		select {
		case c := <-results:
			inflight--
			r.observe(&c)
			if c.err == nil && !r.rules.retryableStatus(c.resp.StatusCode, r.keyed) {
				if c.n != n {
					r.events.tell(ctx, &Event{Kind: EventHedgeWon, Request: c.req, Attempt: c.n})
				}
				for i, cancel := range cancels {
					if i != c.n-n {
						cancel(errHedgeLost)
					}
				}
				if last != nil {
					last.close()
				}
				r.drain(results, inflight)
				c.resp.Body = wrapCancel(c.resp.Body, c.cancel)
				return c.req, c.resp, nil, sent
			}
			if last != nil {
				last.close()
			}
			last = &c
			if inflight == 0 {
				if last.resp != nil {
					last.resp.Body = wrapCancel(last.resp.Body, last.cancel)
				} else {
					last.cancel(nil)
				}
				return last.req, last.resp, last.err, sent
			}
		case <-timer.C:
			if sent > r.maxHedges || n+sent > r.maxAttempts || !r.gate.budget.withdraw(mono(), false) {
				continue
			}
			areq, _, err := r.prep.prepare(n + sent)
			if err != nil {
				continue // the copy cannot be made (GetBody, BeforeAttempt): the others run on
			}
			hedge := sentAttempt{at: clockNow()}
			if refused, _ := r.gate.allow(ctx, &hedge, false); refused != ReasonNone {
				closeRequestBody(areq)
				continue
			}
			r.events.tell(ctx, &Event{Kind: EventHedge, Request: areq, Attempt: n + sent})
			launch(areq, n+sent, &hedge)
			inflight++
			sent++
			timer.Reset(r.delay)
		}
	}
}

// raceParams is what race needs of the RoundTrip it runs in.
type raceParams struct {
	base            http.RoundTripper // what via ends in: net/http's, if its resends are to be withheld
	via             http.RoundTripper
	attemptTimeout  time.Duration
	exchangeTimeout time.Duration
	delay           time.Duration
	maxHedges       int
	maxAttempts     int
	gate            gate // the RoundTrip's brakes
	lat             *latencies
	prep            preparer // the hedges' own, so that the exchange stays on the stack
	rules           rules    // the Transport's: a usable response is one they would not retry
	keyed           bool     // the request carries an Idempotency-Key
	events          teller
}

// teller is where a race reports its events: the Transport, to its logs
// and hooks. An interface, so that the race holds the Transport with no
// allocation of its own (a method value would be one).
type teller interface {
	tell(ctx context.Context, e *Event)
}

// observe reports one copy's outcome to the Breaker, the Throttle and the
// latencies (a cancelled copy teaches nothing: the Breaker excludes it,
// the Throttle skips it, and its time is not a latency).
func (r *raceParams) observe(c *copyResult) {
	r.gate.report(&r.rules, &sentAttempt{ticket: c.ticket, permit: c.permit, paceSeq: c.paceSeq, req: c.sreq, resp: c.resp, err: c.err, sent: c.sent})
	if c.err == nil {
		r.lat.record(c.took)
	}
}

// drain reports the cancelled copies still in flight as they come back,
// and closes their bodies.
func (r *raceParams) drain(results chan copyResult, inflight int) {
	if inflight == 0 {
		return
	}
	go func() {
		for range inflight {
			c := <-results
			r.observe(&c)
			c.close()
		}
	}()
}

// close drains and closes a copy's response, and releases its context.
func (c *copyResult) close() {
	if c.resp != nil {
		discard(c.resp)
	}
	c.cancel(errHedgeLost)
}

// errHedgeLost is the cause a losing copy is cancelled with.
var errHedgeLost = fmt.Errorf("retryhttp: another copy of the request answered first")

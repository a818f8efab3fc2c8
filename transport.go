// Package retryhttp makes HTTP calls safe to retry.
//
// Transport is an http.RoundTripper that wraps another one and sends a
// request again when the failure was transient (a dropped connection, 503,
// 429) and sending it again cannot cause a second side effect: the method is
// idempotent, or the request carries an Idempotency-Key. It waits with capped
// exponential backoff and jitter between attempts, honours Retry-After, and
// stops at a number of attempts, a total time and the caller's deadline.
//
//	client := &http.Client{Transport: &retryhttp.Transport{}}
package retryhttp

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"github.com/retryhttp/retryhttp/internal/opkey"
	"github.com/retryhttp/retryhttp/internal/wire"
	"github.com/retryhttp/retryhttp/overload"
)

// Transport is an http.RoundTripper that retries transient failures of
// requests that are safe to send again. The zero value is ready to use: it
// sends through http.DefaultTransport with the default Policy and budget.
//
// A Transport is safe for concurrent use by multiple goroutines and must not
// be copied after first use. Like http.Transport it should be reused, not
// made per request. It starts no goroutines of its own, but for hedging:
// each hedged copy is sent on a goroutine, and a losing copy is drained on
// one after the race (see Hedging).
//
// What is retried. A request is replayable when its method is idempotent
// (GET, HEAD, OPTIONS, TRACE, PUT, DELETE) or it carries an Idempotency-Key
// or X-Idempotency-Key header, read as net/http reads them. A replayable
// request is retried after a retryable status (RetryStatuses, and 409 when it
// has a key) or a transient network error. Any request, POST included, is
// retried after an error proving nothing was sent (a refused connection, a
// temporary DNS failure). Nothing else is retried.
//
// What the caller gets. When attempts run out on a status, the last response
// itself, body unread and err nil: a drop-in transport must not turn a 503
// into an error. When the last attempt ended in an error, a *RetryError
// wrapping it. Bodies of discarded responses are drained (a little) and
// closed, so their connections are reused. resp.Request is the caller's
// request, as in net/http; the caller's request is never modified.
type Transport struct {
	// Base sends each attempt. nil means http.DefaultTransport, read on
	// every RoundTrip as http.Client reads it, so that a process-wide setting
	// of it (a proxy, TLS roots, a test double) applies here too. Its
	// defaults keep 2 idle connections per host: a client calling one host
	// from many goroutines wants a Base of its own with a larger
	// MaxIdleConnsPerHost.
	Base http.RoundTripper

	// Policy bounds attempts and waits; the zero value is the default.
	Policy Policy

	// InjectIdempotencyKey gives POST and PATCH requests that carry no
	// Idempotency-Key a fresh random one (UUIDv4), generated once per
	// RoundTrip and sent unchanged on every attempt, which makes them
	// retryable. The caller's request is not modified, so resp.Request does
	// not show the key; a caller that needs the key for its own records sets
	// it itself. Injected keys are visible to hooks and logs.
	//
	// Only turn it on for servers that honour the header (see package
	// idempotency): to one that ignores it, a retried POST is a second POST.
	InjectIdempotencyKey bool

	// RetryStatuses replaces the response statuses that are retried. nil
	// means DefaultRetryStatuses(): 408, 409, 429, 502, 503, 504. A 409 in
	// the set counts only for requests with an Idempotency-Key. An empty
	// non-nil slice retries no status.
	RetryStatuses []int

	// ShouldRetry, if set, is asked first about every attempt's outcome,
	// the last included: exactly one of resp and err is non-nil, and req
	// is the request that was sent (with any injected key). Returning
	// DecisionDefer applies the built-in rules. A non-nil error takes the
	// place of the outcome: the response is closed, and the error is what
	// the caller gets (in a *RetryError) if no retry follows, as
	// go-retryablehttp's CheckRetry errors are (see FromCheckRetry). It
	// must not read resp.Body (see PeekBody). Use it for signals the rules
	// do not know. Whatever it says, a request that is not safe to send
	// again is not retried (see Policy.RetryNonIdempotent).
	//
	// The built-in rules already honour the servers' own advice on an
	// error response: X-Should-Retry: false and Stripe-Should-Retry: false
	// stop; "true" retries a safe request even on a status outside
	// RetryStatuses.
	ShouldRetry func(req *http.Request, resp *http.Response, err error) (Decision, error)

	// PeekBody, if positive, reads up to that many bytes of the body of
	// every response with a status of 400 or more before ShouldRetry is
	// asked, so that ShouldRetry can look at them with BodyPrefix (an AWS
	// ThrottlingException in a 400, say). The caller still gets the whole
	// body. 0 peeks at nothing.
	PeekBody int

	// RetryHints read how long to wait from a retryable response that has
	// no usable Retry-After: the rate-limit headers of real APIs. nil means
	// DefaultRetryHints(); an empty non-nil slice reads none. The first hint
	// that answers wins, and its wait is capped by Policy.MaxRetryAfter like
	// Retry-After's.
	RetryHints []RetryHint

	// Backoff, if set, returns the wait before the retry that follows
	// attempt n (1 for the first), whose request was req and response resp
	// (nil after a network error), in place of the Policy's jittered backoff and of the
	// server's Retry-After and RetryHints: a shape of your own (linear,
	// per-status, go-retryablehttp's Backoff) is kept as it is. It reads
	// Retry-After itself if it wants to (ServerWait), and neither MaxDelay
	// nor MaxRetryAfter caps it; MaxElapsed and the caller's deadline still
	// bound the retries, and a negative wait is 0. It is a field of the
	// Transport, not of the Policy, so that a Policy stays a comparable
	// value.
	Backoff func(req *http.Request, n int, resp *http.Response) time.Duration

	// BeforeAttempt, if set, is called with each attempt's request before
	// it is sent, the first included: a copy of the caller's request with a
	// header of its own, which it may change (re-sign the request, put a
	// fresh token in Authorization, add a per-attempt header) but not its
	// body. An error stops the call: nothing more is sent, and RoundTrip
	// returns a *RetryError with ReasonBeforeAttempt wrapping it (a
	// response held from an earlier attempt is closed). It runs on the
	// RoundTrip's goroutine; AttemptFromContext(req.Context()) is the
	// attempt's number.
	BeforeAttempt func(req *http.Request) error

	// AttemptHeader, if set, names a request header that carries the
	// attempt number on every attempt, 1 for the first, so that servers and
	// proxies see retries (as Envoy's x-envoy-attempt-count). The layers
	// below the Transport see it in the context either way
	// (AttemptFromContext).
	AttemptHeader string

	// Budget caps retries at a share of first attempts (see Budget). nil
	// means the Transport's own default budget: 10% of requests plus 10
	// retries/s over 10 s. NoBudget turns the cap off. Share one *Budget
	// between Transports that call the same dependency.
	Budget *Budget

	// Breaker, if set, fails attempts to a host fast with ErrCircuitOpen
	// after repeated failures (see Breaker). nil means no breaker.
	Breaker *Breaker

	// Hedge, if set, sends another copy of a safe request that is slow to
	// answer, and takes the first usable response (see Hedging). nil
	// means no hedging.
	Hedge *Hedging

	// Throttle, if set, rejects attempts locally, with ErrThrottled,
	// while a host rejects most of what it is sent (see Throttle). nil
	// means no throttle.
	Throttle *Throttle

	// Limit, if set, keeps an adaptive limit on the attempts in flight to
	// each host, moved by their latency (see overload.Limiter): an attempt
	// over it waits in the Limiter's queue, never past the context's
	// deadline, or is refused at once with overload.ErrLimited, nothing
	// sent (a give-up with ReasonLimited). An attempt counts from its send
	// to its response's headers. nil means no limit.
	Limit *overload.Limiter

	// Pacer, if set, spreads the requests to each host over the quota its
	// rate-limit headers announce, and holds one that would exceed it
	// until the window resets (see Pacer): one whose wait would pass the
	// Pacer's MaxWait or the context's deadline ends at once, nothing
	// sent (a give-up with ReasonPaced). nil means no pacing.
	Pacer *Pacer

	// Hooks are told of each retry decision, each stacked retry, each
	// hedge and each RoundTrip's end, in order (see Hook): Prometheus
	// metrics (*[Metrics]), a second logger ([LogHook]), retryhttpotel's
	// spans, a [HookFunc] of your own. AddHook adds one after construction.
	Hooks []Hook

	// Logger gets one Debug record per retry, one Warn record per give-up
	// and one Warn record per kind of stacked retry (what a [LogHook]
	// logs). nil means slog.Default(), as for every Logger in this
	// library; a Logger on slog.DiscardHandler is silent. It is a field,
	// not a hook to add, because a Transport logs its give-ups by default,
	// as net/http logs to its ErrorLog: the field is where that default is
	// redirected or silenced.
	Logger *slog.Logger

	ownBudget   Budget                         // the default budget, when Budget is nil
	seen        recentKeys                     // keys sent recently, to recognise an upper layer's retry
	resolved    atomic.Pointer[resolvedPolicy] // Policy with its defaults, resolved once
	lastHost    atomic.Pointer[lastHost]       // the brakes' entries for the last host called
	trackOnce   sync.Once
	stackWarned atomic.Uint32 // a bit per stackedSignal warned about
	hookState
}

func (t *Transport) baseTransport() http.RoundTripper {
	if t.Base != nil {
		return t.Base
	}
	return http.DefaultTransport
}

// CloseIdleConnections closes the idle connections of the base transport,
// so that http.Client.CloseIdleConnections works through a Transport.
func (t *Transport) CloseIdleConnections() {
	type closeIdler interface{ CloseIdleConnections() }
	if c, ok := t.baseTransport().(closeIdler); ok {
		c.CloseIdleConnections()
	}
}

// trackBreaker gives the Breaker to every hook that reports its
// circuits (*Metrics' circuit_state gauge reads them when scraped).
func (t *Transport) trackBreaker() {
	if hs := t.hooks.Load(); hs != nil { // RoundTrip stored the Hooks field's set
		for _, h := range hs.list {
			if w, ok := h.(breakerWatcher); ok {
				w.watchBreaker(t.Breaker)
			}
		}
	}
}

// RoundTrip implements http.RoundTripper.
//
// The order of the brakes, the one list the other docs refer to: each
// attempt is asked of BeforeAttempt, then the Pacer (where it may wait
// for the host's quota), then the Limit (where it may wait in the host's
// queue), then the Throttle, then the Breaker, and sent; after a
// retryable failure, the Policy decides the wait and whether another
// attempt fits, and the Budget is asked last. A brake that refuses ends
// the RoundTrip with its Reason (ReasonPaced, ReasonLimited,
// ReasonThrottled, ReasonCircuitOpen, ReasonBudget), an EventGiveUp, and
// nothing sent.
//
// What the caller gets: the outcome of the last attempt sent. When it is a
// response (a success, a status not retried, or the last 503 when the
// Transport gave up) it is returned with err nil, body readable, as a
// plain http.Transport would return it. When it is an error, a *RetryError
// wrapping it. When no further attempt could be sent after a response
// (the circuit opened during the wait, the body could not be re-read),
// that response is returned. A *RetryError with ErrCircuitOpen, and no
// response, means the breaker refused the first attempt: nothing was
// sent. So branch on err for "nothing came back" and on the status for
// what did; the reason a response came back after retries is in the logs,
// the metrics and the hooks' events, which always agree.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	hs := t.hooks.Load() // nil when there are none: one atomic load for them
	if hs == nil && len(t.Hooks) != 0 {
		hs = t.firstHooks()
	}
	if hs != nil && hs.roundTrip != nil {
		return hs.roundTrip.RoundTrip(req)
	}
	return t.roundTrip(req)
}

// exchange is what one RoundTrip's attempts share: the caller's request,
// its Policy, the key and body every attempt carries, where attempts go,
// and the brakes. It lives on the RoundTrip's stack.
type exchange struct {
	req        *http.Request // the caller's
	ctx        context.Context
	p          *Policy // shared: copy before changing it
	judge      rules
	prep       preparer          // each attempt's request
	keyed      bool              // an Idempotency-Key is sent, the caller's or injected
	replayable bool              // the method or the key makes a resend safe
	base, via  http.RoundTripper // via: base, or the hooks' WrapAttempt chain around it
	gate       gate
	hedge      *raceParams // set when this request may be hedged
	start      time.Duration

	// What one attempt leaves to the next.
	last *http.Response // kept across a wait, returned if no attempt follows
	prev time.Duration  // the previous backoff wait, for JitterDecorrelated
	due  time.Duration  // when the next attempt is sent, on mono's clock: close enough for the Throttle's window
}

// roundTrip is RoundTrip inside the hooks' wrappers: it prepares the
// exchange, the attempts' shared state, on its own stack (see begin), and
// runs the attempts.
func (t *Transport) roundTrip(req *http.Request) (*http.Response, error) {
	var x exchange
	if err := t.begin(&x, req); err != nil {
		closeRequestBody(req)
		return nil, err
	}
	return t.run(&x)
}

// begin prepares x for req: the Policy, the key (the caller's, derived
// from the operation, or injected), whether a layer above retries too
// (then the request is sent once), the body, the brakes and the hedging.
// The caller closes req's body on an error.
func (t *Transport) begin(x *exchange, req *http.Request) error {
	if req.URL == nil {
		return errors.New("retryhttp: nil Request.URL")
	}
	x.req, x.ctx = req, req.Context()
	c := callFrom(x.ctx)
	p, err := t.policy(c.policy)
	if err == nil && t.Hedge != nil {
		err = t.Hedge.Validate() // every request fails on it, hedged or not, as on an invalid Policy
	}
	if err != nil {
		return err
	}
	// The rules for judging an outcome, as the fields say now, written in
	// place: a rules value built and copied in costs 22 instructions more.
	x.judge.statuses, x.judge.shouldRetry, x.judge.hints = t.RetryStatuses, t.ShouldRetry, t.RetryHints
	x.prep.req, x.prep.header, x.prep.attemptHeader, x.prep.before = req, req.Header, t.AttemptHeader, t.BeforeAttempt
	stableKey, derived := t.key(x)
	var rewritten bool
	if x.ctx, x.prep.header, rewritten = requestPriority(x.ctx, x.prep.header); rewritten {
		x.prep.rewritten = true
	}
	x.start, x.p = mono(), p
	x.due = x.start
	if p.MaxAttempts > 1 { // a Transport that sends once stacks on nothing
		if signal := t.upperRetry(x, c, stableKey, derived); signal != stackedNone {
			once := *p
			once.MaxAttempts = 1 // the layer above retries: send this once
			x.p = &once
			t.stacked(x.ctx, req, signal)
		}
	}
	x.replayable = x.keyed || wire.Idempotent(req.Method) || x.p.RetryNonIdempotent
	if err = x.prep.body.load(req, x.p); err != nil {
		return err
	}
	x.prep.checkAsIs()
	t.attach(x)
	return nil
}

// key gives x the Idempotency-Key its attempts carry: the caller's, or,
// with InjectIdempotencyKey, one derived from the operation the request
// belongs to (see WithOperationKey) or a fresh random one. It returns the
// key if it is the same on every run of the call (the caller's or a
// derived one), and whether it was derived.
func (t *Transport) key(x *exchange) (stable string, derived bool) {
	x.keyed = wire.HasKey(x.prep.header)
	switch {
	case x.keyed:
		return keyOf(x.prep.header), false
	case !t.InjectIdempotencyKey || !wire.Keyed(x.req.Method):
		return "", false
	}
	var key string
	if op := opkey.From(x.ctx); op != nil {
		key = derivedKey(x.ctx, op, x.req)
		stable, derived = key, true
	} else {
		key = newIdempotencyKey()
	}
	x.prep.header = withIdempotencyKey(x.prep.header, key)
	x.prep.rewritten, x.keyed = true, true
	return stable, derived
}

// attach gives x where its attempts go (Base, through the hooks'
// WrapAttempt chain) and its brakes: the Budget, its host's state in the
// per-host brakes, looked up once, and the hedging race when the request
// may be hedged. The first attempt's deposit in the Budget is made here.
func (t *Transport) attach(x *exchange) {
	x.base = t.baseTransport()
	x.via = x.base
	if hs := t.hooks.Load(); hs != nil { // RoundTrip stored the Hooks field's set
		x.via = hs.attempt(x.base)
	}
	x.gate.budget = t.retryBudget()
	if t.Breaker != nil || t.Throttle != nil || t.Limit != nil || t.Pacer != nil {
		h := hostBrakes(&t.lastHost, brakes{t.Breaker, t.Throttle, t.Limit, t.Pacer}, x.req.URL)
		x.gate.circuit, x.gate.throttle, x.gate.limit, x.gate.pace = h.circuit, h.counts, h.limit, h.pace
		if t.Breaker != nil {
			t.trackOnce.Do(t.trackBreaker)
		}
		if t.Throttle != nil {
			x.gate.k = t.Throttle.settings.K
		}
	}
	x.gate.budget.deposit(x.start)
	p := x.p
	if t.Hedge != nil && p.MaxAttempts > 1 && t.Hedge.hedgeable(x.req.Method, x.keyed, x.prep.body.replayable) {
		x.hedge = &raceParams{base: x.base, via: x.via, attemptTimeout: p.AttemptTimeout, exchangeTimeout: p.ExchangeTimeout,
			maxHedges: t.Hedge.maxHedges(), maxAttempts: p.MaxAttempts, gate: x.gate, lat: t.Hedge.latenciesOf(x.req.URL),
			prep: x.prep, rules: x.judge, keyed: x.keyed, events: t} // copies: the exchange stays on the stack
	}
}

// run makes x's attempts until one is returned: each admitted (its
// request prepared, the brakes asked), sent (once, or raced with its
// hedges), judged, and, when a retry is both useful and safe, followed by
// the wait that the Policy, the deadline and the Budget allow.
func (t *Transport) run(x *exchange) (*http.Response, error) {
	for n := 1; ; n++ {
		var sent sentAttempt // this attempt as the per-host brakes see it
		areq, end := t.admit(x, n, &sent)
		if end.over() {
			return t.finish(x, &end)
		}
		var resp *http.Response
		var err error
		areq, resp, err, n = t.sendAttempt(x, areq, n, &sent)
		if resp, end = t.verdict(x, areq, resp, err, n); end.over() {
			return t.finish(x, &end)
		}
		if end = x.pause(resp, n); end.over() {
			return t.finish(x, &end)
		}
	}
}

// admit prepares attempt n's request and asks the brakes for it. The call
// ends there when the request cannot be had again (its body,
// BeforeAttempt) or a brake refuses it: with the response kept from the
// previous attempt, if any (see cannotSend). Once the attempt is
// admitted, that response is drained.
func (t *Transport) admit(x *exchange, n int, sent *sentAttempt) (*http.Request, ending) {
	areq, reason, err := x.prep.prepare(n)
	switch reason {
	case ReasonBody:
		return nil, t.cannotSend(x, &Event{Request: x.req, Attempt: n - 1, Response: x.last, Err: err, GiveUp: ReasonBody})
	case ReasonBeforeAttempt:
		x.dropLast()
		return nil, ending{nil, err, n - 1, ReasonBeforeAttempt}
	}
	if x.gate.perHost() {
		if x.gate.readsTime() { // its send time, near enough for the windows, made only for a brake that reads it
			sent.at = monoBase.Add(x.due)
		}
		if refused, err := x.gate.allow(x.ctx, sent, true); refused != ReasonNone {
			return nil, t.refused(x, &Event{Request: areq, Attempt: n - 1, Response: x.last, Err: err, GiveUp: refused})
		}
	}
	x.dropLast()
	return areq, ending{}
}

// sendAttempt sends areq, attempt n, and returns the request judged, its
// outcome and the number of the last attempt made: raced with hedges when
// the request may be hedged and its host's latencies are known (each copy
// is an attempt), sent once otherwise (and a resend net/http made of it on
// its own counts as an attempt too).
func (t *Transport) sendAttempt(x *exchange, areq *http.Request, n int, sent *sentAttempt) (*http.Request, *http.Response, error, int) {
	var resp *http.Response
	var err error
	var hedged bool // a hedge is possible and the host's latencies are known
	if x.hedge != nil && n < x.p.MaxAttempts {
		x.hedge.delay, hedged = t.Hedge.delay(x.hedge.lat)
	}
	if hedged {
		var copies int
		areq, resp, err, copies = x.hedge.race(x.ctx, areq, n, sent)
		n += copies - 1
	} else {
		sreq, sends := traceSends(x.base, areq, x.p.MaxAttempts-n+1)
		var sentAt time.Duration
		if x.hedge != nil { // learning the host's latencies
			sentAt = mono()
		}
		resp, err = send(x.via, sreq, x.p.AttemptTimeout, x.p.ExchangeTimeout)
		if x.gate.perHost() { // a success is counted at its send time, no clock read
			sent.req, sent.resp, sent.err, sent.sent = areq, resp, err, x.due
			x.gate.report(&x.judge, sent)
		}
		if x.hedge != nil && err == nil {
			x.hedge.lat.record(mono() - sentAt)
		}
		if sends != nil { // net/http resent the request itself: each resend is an attempt
			for range sends.extra() {
				n++
				x.gate.budget.withdraw(mono(), false)
			}
		}
	}
	if t.PeekBody > 0 && resp != nil && resp.StatusCode >= 400 {
		resp.Body = peek(resp.Body, t.PeekBody)
	}
	return areq, resp, err, n
}

// verdict judges attempt n's outcome. The call ends with it when it is
// usable, not retryable, or no retry can follow (see nextWait); otherwise
// a retry follows at x.due, once the event that says so is told, and the
// response to drain or keep meanwhile is returned (see pause).
func (t *Transport) verdict(x *exchange, areq *http.Request, resp *http.Response, err error, n int) (*http.Response, ending) {
	if x.judge.plainSuccess(resp, err) {
		return nil, ending{resp, nil, n, ReasonNotRetryable}
	}
	retry, stop, trigger, replaced := x.judge.decide(areq, resp, err, sendable{
		again:       x.replayable && x.prep.body.replayable,
		unsentAgain: x.prep.body.replayable,
		keyed:       x.keyed,
	})
	if replaced != nil { // ShouldRetry's error is the outcome now
		if resp != nil {
			discard(resp)
		}
		resp, err = nil, replaced
	}
	if !retry {
		if stop == ReasonNotRetryable && trigger != "" && spent(resp, err) {
			// A Transport below retried this under its own Policy and
			// gave up: two retry layers on one path.
			t.stacked(x.ctx, areq, stackedRetryhttp)
		}
		return nil, ending{resp, err, n, stop}
	}
	e := Event{Request: areq, Attempt: n, Response: resp, Err: err, Trigger: trigger}
	if t.Backoff == nil {
		x.prev = x.p.backoff(n-1, x.prev, rand.Float64(), resp != nil && resp.StatusCode == http.StatusTooManyRequests)
	} else if n < x.p.MaxAttempts { // asked only for a retry that may follow
		x.prev = max(0, t.Backoff(areq, n, resp))
	}
	e.Wait = x.prev
	x.due = t.nextWait(x, &e)
	t.event(x.ctx, &e)
	if e.GiveUp != ReasonNone {
		return nil, ending{resp, err, n, e.GiveUp}
	}
	return resp, ending{}
}

// pause waits until x.due, when the retry that follows attempt n is to be
// sent on mono's clock (nextWait's reading plus the wait): the time the
// hooks took since is not waited again, and a wait already over (a
// backoff of a nanosecond) is not slept at all. It keeps resp in x.last,
// to return should the next attempt not be sent (a brake refuses it, the
// body cannot be had again), and otherwise drains it; a wait cut short by
// the context ends the call with its cause, the kept response closed.
func (x *exchange) pause(resp *http.Response, n int) ending {
	if resp != nil {
		if x.gate.perHost() || x.prep.body.mayFail() {
			x.last = keep(resp)
		} else {
			discard(resp)
		}
	}
	if err := sleep(x.ctx, x.due-mono()); err != nil {
		x.dropLast()
		return ending{nil, err, n, ReasonCanceled}
	}
	return ending{}
}

// dropLast drains and forgets the response kept from the previous
// attempt, if any.
func (x *exchange) dropLast() {
	if x.last != nil {
		discard(x.last)
		x.last = nil
	}
}

// nextWait sets e.Wait, the wait before the retry that follows e's
// attempt (the backoff it holds, or the server's own wait), and leaves
// e.GiveUp ReasonNone; or sets e.GiveUp to the reason no retry can follow:
// the attempts are spent, the server asks for too long a wait, the wait
// would end past MaxElapsed or the caller's deadline, the circuit opened
// meanwhile, or the Budget is spent (asked last, since asking spends it).
// It returns when the retry would be sent, on the clock mono reads.
func (t *Transport) nextWait(x *exchange, e *Event) time.Duration {
	wall := time.Now()
	now := wall.Sub(monoBase) // monotonic, as mono() reads it
	p := x.p
	var asked time.Duration
	var hasAsked bool
	if t.Backoff == nil && e.Response != nil {
		if asked, hasAsked = ServerWait(e.Response, wall, t.RetryHints); hasAsked {
			e.Wait = asked + p.retryAfterSpread(rand.Float64())
		}
	}
	dl, hasDL := x.ctx.Deadline()
	switch {
	case e.Attempt >= p.MaxAttempts:
		e.GiveUp = ReasonAttempts
	case hasAsked && asked > p.MaxRetryAfter:
		e.GiveUp = ReasonRetryAfterTooLong
	case now+e.Wait-x.start > p.MaxElapsed:
		e.GiveUp = ReasonElapsed
	case hasDL && dl.Sub(wall) < e.Wait:
		e.GiveUp = ReasonDeadline
	case x.gate.circuit != nil && x.gate.circuit.isOpen(wall):
		e.GiveUp = ReasonCircuitOpen
	case !x.gate.budget.withdraw(now, hasAsked || e.Response != nil && e.Response.StatusCode == http.StatusTooManyRequests):
		e.GiveUp = ReasonBudget
	}
	return now + e.Wait
}

// policy returns the Policy of a request, its defaults filled in: the
// per-request override, or the Transport's own, resolved once for as long
// as it does not change. The result may be shared: do not change it.
func (t *Transport) policy(override *Policy) (*Policy, error) {
	if override != nil {
		p, err := override.resolve()
		return &p, err
	}
	if r := t.resolved.Load(); r != nil && r.src == t.Policy {
		return &r.p, nil
	}
	p, err := t.Policy.resolve()
	if err == nil {
		t.resolved.Store(&resolvedPolicy{src: t.Policy, p: p})
	}
	return &p, err
}

// retryBudget returns the Budget retries draw from: Budget, or the
// Transport's own default. NoBudget allows every retry.
func (t *Transport) retryBudget() *Budget {
	if t.Budget != nil {
		return t.Budget
	}
	return &t.ownBudget
}

// cannotSend ends a RoundTrip whose next attempt cannot be sent (a brake
// refused it, or the body cannot be re-read): the caller gets the response
// kept from the previous attempt, e.Response, if there is one, and
// otherwise a RetryError wrapping e.Err. It is a give-up, reported like any
// other: the event names e.Request, the attempt that could not be sent,
// and the caller's request is the response's Request.
func (t *Transport) cannotSend(x *exchange, e *Event) ending {
	if e.Response != nil {
		e.Err = nil
	}
	t.event(x.ctx, e)
	x.last = nil // returned
	return ending{e.Response, e.Err, e.Attempt, e.GiveUp}
}

// refused ends a RoundTrip whose next attempt, e.Request, the gate
// refused for e.GiveUp: when the caller's context ended in the limit's
// queue (ReasonCanceled), as the caller's own doing, no give-up, and
// otherwise as a give-up (see cannotSend).
func (t *Transport) refused(x *exchange, e *Event) ending {
	closeRequestBody(e.Request)
	if e.GiveUp == ReasonCanceled {
		x.dropLast()
		return ending{nil, e.Err, e.Attempt, ReasonCanceled}
	}
	return t.cannotSend(x, e)
}

// finish returns the outcome to the caller and counts it. What a Transport that retries (its Policy allows more than one
// attempt) gave up on is marked spent, so that a Transport above does not
// retry it again; one that sends once leaves the retrying to the layer
// above.
func (t *Transport) finish(x *exchange, o *ending) (*http.Response, error) {
	replay := replayNo
	if x.keyed && replayed(o.resp) { // an idempotency layer replays keyed requests alone
		replay = replayYes
	}
	switch hs := t.hooks.Load(); {
	case hs != nil && hs.counter != nil && replay == replayNo: // a counter alone, and nothing to log: no Event
		hs.counter.countDone(x.req, *o, false)
	case hs != nil || replay == replayYes: // the observers of EventDone; the logs, of a replay
		t.tell(x.ctx, &Event{Kind: EventDone, Request: x.req, Attempt: o.attempts, Response: o.resp, Err: o.err, GiveUp: o.reason,
			Outcome: outcomeOf(o.resp, o.err, o.reason), replay: replay})
	}
	retried := x.p.MaxAttempts > 1
	if o.err != nil {
		return nil, &RetryError{Attempts: o.attempts, Reason: o.reason, Err: o.err, retried: retried}
	}
	resp := o.resp
	if retried && o.reason.GaveUp() {
		// A Transport above must not retry what this one gave up on.
		resp.Body = &spentBody{resp.Body}
	}
	resp.Request = x.req
	return resp, nil
}

// event reports a retry decision (EventRetry or EventGiveUp) to the
// Logger and the hooks.
func (t *Transport) event(ctx context.Context, e *Event) {
	e.Kind = EventRetry
	if e.GiveUp != ReasonNone {
		e.Kind = EventGiveUp
	}
	t.tell(ctx, e)
}

// tell reports e to the Logger, then to the hooks.
func (t *Transport) tell(ctx context.Context, e *Event) {
	if e.Kind != EventDone || e.isReplay() { // of a RoundTrip's end, the logs tell only a replay
		logEvent(ctx, orDefault(t.Logger), &t.stackWarned, *e)
	}
	if hs := t.hooks.Load(); hs != nil {
		hs.emit(ctx, e)
	}
}

// firstHooks stores the set of the Hooks field on the first RoundTrip;
// nil when the field is empty.
func (t *Transport) firstHooks() *hookSet {
	if len(t.Hooks) == 0 {
		return nil
	}
	t.hookMu.Lock()
	defer t.hookMu.Unlock()
	if hs := t.hooks.Load(); hs != nil {
		return hs
	}
	return t.storeHooks(nil, t.Hooks...)
}

// AddHook adds h to the Transport's hooks, after the Hooks field's and
// those added before; a hook already added (the same pointer, or an equal
// comparable value) is not added again. It is safe to call while the
// Transport is in use: RoundTrips that have begun finish with the hooks
// they began with. It is for telemetry that attaches to a Transport it did
// not build (retryhttpotel.Instrument); a Transport you build takes its
// hooks in the Hooks field.
func (t *Transport) AddHook(h Hook) {
	if h == nil {
		return
	}
	t.hookMu.Lock()
	defer t.hookMu.Unlock()
	old := t.hooks.Load()
	if old == nil {
		old = &hookSet{list: t.Hooks}
	}
	comparable := reflect.TypeOf(h).Comparable() // a func hook cannot be compared, nor found again
	for _, x := range old.list {
		if comparable && reflect.TypeOf(x) == reflect.TypeOf(h) && x == h {
			return
		}
	}
	t.storeHooks(old.list, h)
	if w, ok := h.(breakerWatcher); ok && t.Breaker != nil {
		w.watchBreaker(t.Breaker)
	}
}

// storeHooks stores and returns the set of list and then add, with its
// WrapRoundTrip chain built; t.hookMu is held.
func (t *Transport) storeHooks(list []Hook, add ...Hook) *hookSet {
	hs := &hookSet{list: make([]Hook, 0, len(list)+len(add))}
	hs.list = append(hs.list, list...)
	for _, h := range add {
		if h != nil {
			hs.list = append(hs.list, h)
		}
	}
	if len(hs.list) == 1 {
		hs.counter, _ = hs.list[0].(doneCounter)
	}
	var rt http.RoundTripper = loop{t}
	for i := len(hs.list) - 1; i >= 0; i-- {
		if w, ok := hs.list[i].(roundTripWrapper); ok {
			rt = w.WrapRoundTrip(rt)
		}
		if _, ok := hs.list[i].(attemptWrapper); ok {
			hs.wraps = true
		}
	}
	if _, bare := rt.(loop); !bare { // metrics and logs alone: RoundTrip calls the loop itself
		hs.roundTrip = rt
	}
	t.hooks.Store(hs)
	return hs
}

// loop is the Transport's own retry loop, innermost in the WrapRoundTrip
// chain.
type loop struct{ t *Transport }

func (l loop) RoundTrip(r *http.Request) (*http.Response, error) { return l.t.roundTrip(r) }

// upperRetry reports whether req is an upper layer's retry, and by which
// signal; "" when it is not. key is the request's Idempotency-Key, if the
// caller set or derived one (a random injected key never repeats).
func (t *Transport) upperRetry(x *exchange, c call, key string, derived bool) stackedSignal {
	req, now, window := x.req, x.start, x.p.MaxElapsed
	if c.attempt > 1 {
		return stackedRetryhttp
	}
	h := req.Header
	if len(h) == 0 {
		return stackedNone
	}
	if v := field(h, "Amz-Sdk-Request"); v != "" {
		if n, ok := fieldInt(v, "attempt="); ok && n > 1 {
			return stackedAWS
		}
	}
	if v := field(h, "X-Stainless-Retry-Count"); v != "" && v != "0" {
		return stackedStainless
	}
	if v := field(h, "X-Goog-Api-Client"); v != "" {
		if n, ok := fieldInt(v, "gccl-attempt-count/"); ok && n > 1 {
			return stackedGoogle
		}
	}
	if key != "" && t.seen.repeat(key, now, window) {
		if derived {
			return stackedOperation
		}
		return stackedKey
	}
	return stackedNone
}

// stacked counts an upper layer's retry, and warns once per Transport and
// signal that two layers retry the same call. A retried operation is not
// that: its handler ran again (the inbound client retried it) and made the
// call anew; the call is sent once all the same, so that the operation's
// retries and the Transport's do not multiply, and is counted, but it is
// the design working, not a setting to fix.
func (t *Transport) stacked(ctx context.Context, req *http.Request, signal stackedSignal) {
	t.tell(ctx, &Event{Kind: EventStacked, Request: req, Signal: signal.String()})
}

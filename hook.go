package retryhttp

import (
	"context"
	"net/http"
	"reflect"
	"strconv"
	"sync"
	"sync/atomic"
)

// Hook is the one way to attach telemetry to a Transport, as go-redis's
// Hook is: it may wrap a whole RoundTrip (a span per logical request), wrap
// each attempt's send (a span per attempt), and observe each retry
// decision. Transport.AddHook adds one; hooks compose in the order they
// were added, the first outermost. Embed NoHook to implement only what you
// need.
//
// Prometheus metrics (*[Metrics]), logs ([LogHook]), [OnRetryHook] and
// retryhttpotel are Hooks; the Transport's Metrics, Logger and OnRetry
// fields are shorthands for the first three and are told first. Each
// attempt is observed by wrapping it (WrapAttempt): a wrapper sees it sent
// and sees it end.
type Hook interface {
	// WrapRoundTrip returns the RoundTripper a whole RoundTrip goes
	// through: next (every attempt and wait of one logical request), or
	// one that wraps it. It is called once, when the hook is added. A
	// wrapper must keep the RoundTripper contract: resp.Request is the
	// caller's request.
	WrapRoundTrip(next http.RoundTripper) http.RoundTripper
	// WrapAttempt returns the RoundTripper each attempt is sent through:
	// next (the Transport's Base), or one that wraps it. It is called once
	// per Base the Transport sends through, not per attempt.
	WrapAttempt(next http.RoundTripper) http.RoundTripper
	// OnEvent is told of each retry decision (a retry scheduled, a
	// give-up, before any wait), of each retry stacked on another
	// layer's, and of each RoundTrip's end (EventDone), on the
	// RoundTrip's goroutine. It must not block, nor read the response
	// body.
	OnEvent(ctx context.Context, e Event)
}

// NoHook is a Hook that changes and observes nothing: embed it to
// implement only some of Hook's methods.
type NoHook struct{}

func (NoHook) WrapRoundTrip(next http.RoundTripper) http.RoundTripper { return next }
func (NoHook) WrapAttempt(next http.RoundTripper) http.RoundTripper   { return next }
func (NoHook) OnEvent(context.Context, Event)                         {}

// EventKind says what an Event reports.
type EventKind uint8

const (
	// EventRetry: an attempt failed retryably and a retry follows after
	// Wait.
	EventRetry EventKind = iota + 1
	// EventGiveUp: an attempt failed retryably and no retry follows, for
	// GiveUp; or the breaker refused an attempt.
	EventGiveUp
	// EventStacked: a layer above (or a Transport below) retries this
	// request too; Signal names how the Transport knew.
	EventStacked
	// EventDone: the RoundTrip ended, with what its caller gets. Request
	// is the caller's, Attempt the attempts sent, Response or Err the
	// outcome (do not read the body) and GiveUp the reason no further
	// attempt followed: ReasonNotRetryable for a success or a status not
	// retried (see Outcome).
	EventDone
	// EventHedge: a hedge was sent (see Hedging): Request is its copy and
	// Attempt its attempt number.
	EventHedge
	// EventHedgeWon: a hedge's response was the usable one, and the
	// other copies were cancelled.
	EventHedgeWon
)

func (k EventKind) String() string {
	switch k {
	case EventRetry:
		return "retry"
	case EventGiveUp:
		return "give_up"
	case EventStacked:
		return "stacked"
	case EventDone:
		return "done"
	case EventHedge:
		return "hedge"
	case EventHedgeWon:
		return "hedge_won"
	}
	return "EventKind(" + strconv.Itoa(int(k)) + ")"
}

// Event is what a Hook is told. For EventRetry and EventGiveUp, its
// RetryEvent is the one OnRetry receives; for EventStacked only Request
// and Signal are set.
type Event struct {
	Kind EventKind
	RetryEvent
	// Signal is the signal label of retryhttp_stacked_retries_total, for
	// EventStacked: "retryhttp", "idempotency_key", "operation",
	// "amz_sdk_request", "stainless", "google".
	Signal string
}

// AddHook adds h to the Transport's hooks, after those added before; a
// hook already added (the same pointer, or an equal comparable value) is
// not added again. It is safe to call while the
// Transport is in use: RoundTrips that have begun finish with the hooks
// they began with.
func (t *Transport) AddHook(h Hook) {
	if h == nil {
		return
	}
	t.hookMu.Lock()
	defer t.hookMu.Unlock()
	old := t.hooks.Load()
	var hs hookSet
	if old != nil {
		comparable := reflect.TypeOf(h).Comparable() // a func hook cannot be compared, nor found again
		for _, x := range old.list {
			if comparable && reflect.TypeOf(x) == reflect.TypeOf(h) && x == h {
				return
			}
		}
		hs.list = append(hs.list, old.list...)
	}
	hs.list = append(hs.list, h)
	var rt http.RoundTripper = loop{t}
	for i := len(hs.list) - 1; i >= 0; i-- {
		rt = hs.list[i].WrapRoundTrip(rt)
	}
	hs.roundTrip = rt
	t.hooks.Store(&hs)
	if m, ok := h.(*Metrics); ok && t.Breaker != nil {
		m.track(t.Breaker)
	}
}

// Hooks returns the hooks added, in order.
func (t *Transport) Hooks() []Hook {
	if hs := t.hooks.Load(); hs != nil {
		return append([]Hook(nil), hs.list...)
	}
	return nil
}

// hookSet is a Transport's hooks, immutable once stored.
type hookSet struct {
	list      []Hook
	roundTrip http.RoundTripper // the WrapRoundTrip chain around the Transport's own loop

	mu       sync.Mutex
	attempts map[http.RoundTripper]http.RoundTripper // the WrapAttempt chain, per Base; guarded by mu
}

// attempt returns the RoundTripper attempts to base are sent through,
// built once per base (a Base of a type that cannot be compared, a func,
// is wrapped anew on each RoundTrip).
func (hs *hookSet) attempt(base http.RoundTripper) http.RoundTripper {
	wrap := func() http.RoundTripper {
		rt := base
		for i := len(hs.list) - 1; i >= 0; i-- {
			rt = hs.list[i].WrapAttempt(rt)
		}
		return rt
	}
	if !reflect.TypeOf(base).Comparable() {
		return wrap()
	}
	hs.mu.Lock()
	defer hs.mu.Unlock()
	if rt, ok := hs.attempts[base]; ok {
		return rt
	}
	rt := wrap()
	if hs.attempts == nil {
		hs.attempts = map[http.RoundTripper]http.RoundTripper{}
	}
	hs.attempts[base] = rt
	return rt
}

// emit tells the hooks of e.
func (hs *hookSet) emit(ctx context.Context, e Event) {
	for _, h := range hs.list {
		h.OnEvent(ctx, e)
	}
}

// loop is the Transport's own retry loop, innermost in the WrapRoundTrip
// chain.
type loop struct{ t *Transport }

func (l loop) RoundTrip(r *http.Request) (*http.Response, error) { return l.t.roundTrip(r) }

// hookState is what a Transport holds for its hooks.
type hookState struct {
	hookMu sync.Mutex
	hooks  atomic.Pointer[hookSet]
}

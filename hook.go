package retryhttp

import (
	"context"
	"net/http"
	"reflect"
	"strconv"
	"sync"
	"sync/atomic"
)

// Hook is the one way to attach an observer to a Transport, as go-redis's
// Hook is: it is told of each retry decision, each stacked retry and each
// RoundTrip's end. Transport.AddHook adds one; hooks are told in the order
// they were added. HookFunc makes a function one.
//
// A hook that also wraps requests (a span per request, per attempt, as
// retryhttpotel's does) has either or both of these methods, found when it
// is added:
//
//	WrapRoundTrip(next http.RoundTripper) http.RoundTripper
//	WrapAttempt(next http.RoundTripper) http.RoundTripper
//
// WrapRoundTrip returns the RoundTripper a whole RoundTrip goes through
// (every attempt and wait of one logical request): next, or one that wraps
// it, called once, when the hook is added; the first hook added is
// outermost. WrapAttempt returns the RoundTripper each attempt is sent
// through: the Transport's Base, or one that wraps it, called once per Base
// the Transport sends through, not per attempt; a wrapper sees the attempt
// sent and sees it end. A wrapper must keep the RoundTripper contract:
// resp.Request is the caller's request.
//
// Prometheus metrics (*[Metrics]), logs ([LogHook]), [OnRetryHook] and
// retryhttpotel are Hooks; the Transport's Metrics, Logger and OnRetry
// fields are shorthands for the first three and are told first.
type Hook interface {
	// OnEvent is told of each retry decision (a retry scheduled, a
	// give-up, before any wait), of each retry stacked on another
	// layer's, of each hedge, and of each RoundTrip's end (EventDone), on
	// the RoundTrip's goroutine. It must not block, nor read the response
	// body.
	OnEvent(ctx context.Context, e Event)
}

// HookFunc is a function that is a Hook.
type HookFunc func(ctx context.Context, e Event)

// OnEvent calls f.
func (f HookFunc) OnEvent(ctx context.Context, e Event) { f(ctx, e) }

// roundTripWrapper and attemptWrapper are the optional methods of a Hook
// (see Hook).
type (
	roundTripWrapper interface {
		WrapRoundTrip(next http.RoundTripper) http.RoundTripper
	}
	attemptWrapper interface {
		WrapAttempt(next http.RoundTripper) http.RoundTripper
	}
)

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
		if w, ok := hs.list[i].(roundTripWrapper); ok {
			rt = w.WrapRoundTrip(rt)
		}
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
			if w, ok := hs.list[i].(attemptWrapper); ok {
				rt = w.WrapAttempt(rt)
			}
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

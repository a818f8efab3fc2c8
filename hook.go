package retryhttp

import (
	"context"
	"net/http"
	"reflect"
	"sync"
	"sync/atomic"
)

// Hook is the one way to attach an observer to a Transport, as go-redis's
// Hook is: it is told of each retry decision, each stacked retry, each
// hedge and each RoundTrip's end. A Transport's Hooks field lists them,
// and Transport.AddHook adds one later; hooks are told in that order.
// HookFunc makes a function one.
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
// Prometheus metrics (*[Metrics]), logs ([LogHook]) and retryhttpotel are
// Hooks; the Transport's Logger field is told before them (see
// Transport.Logger for why it is a field).
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

// doneCounter is the optional method of a Hook that counts a RoundTrip's
// end from its parts, as *Metrics does: when the only hook has it, the
// Transport calls it in place of OnEvent(EventDone), and builds no Event,
// which is a tenth of the instructions of a request that succeeds at once
// (BenchmarkSuccessInMemory). The logs' replay record still takes the
// Event path.
type doneCounter interface {
	countDone(req *http.Request, o ending, replay bool)
}

// hookSet is a Transport's hooks, immutable once stored.
type hookSet struct {
	list      []Hook
	counter   doneCounter       // the one hook, if it is a doneCounter; nil otherwise
	roundTrip http.RoundTripper // the WrapRoundTrip chain around the Transport's own loop; nil when no hook wraps it
	wraps     bool              // some hook has WrapAttempt

	mu       sync.Mutex
	attempts map[http.RoundTripper]http.RoundTripper // the WrapAttempt chain, per Base; guarded by mu
}

// attempt returns the RoundTripper attempts to base are sent through,
// built once per base (a Base of a type that cannot be compared, a func,
// is wrapped anew on each RoundTrip).
func (hs *hookSet) attempt(base http.RoundTripper) http.RoundTripper {
	if !hs.wraps { // metrics and logs alone: no lock on the way to the Base
		return base
	}
	return hs.wrapAttempt(base)
}

// wrapAttempt is attempt for a set with a WrapAttempt.
func (hs *hookSet) wrapAttempt(base http.RoundTripper) http.RoundTripper {
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

// emit tells the hooks of e, each given its copy.
func (hs *hookSet) emit(ctx context.Context, e *Event) {
	for _, h := range hs.list {
		h.OnEvent(ctx, *e)
	}
}

// hookState is what a Transport holds for its hooks.
type hookState struct {
	hookMu sync.Mutex
	hooks  atomic.Pointer[hookSet]
}

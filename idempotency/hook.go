package idempotency

import (
	"context"
	"strconv"
)

// Hook observes a Middleware or a Runner, in the shape of retryhttp.Hook's
// OnEvent: an event for each request (or Runner.Do) with its result, and
// one for each claim that lapsed under running work. Options.Hooks and
// RunnerOptions.Hooks take them, told in order; *Metrics is a Hook, so the
// Middleware and the Runner count by putting it in their Hooks. OnEvent runs on the request's goroutine (a
// lapse, on the claim's timer's) and must not block.
type Hook interface {
	OnEvent(ctx context.Context, e Event)
}

// HookFunc is a function that is a Hook.
type HookFunc func(ctx context.Context, e Event)

// OnEvent calls f.
func (f HookFunc) OnEvent(ctx context.Context, e Event) { f(ctx, e) }

// EventKind says what an Event reports.
type EventKind uint8

const (
	// EventResult: a request (or a Do) ended with Result, one of the
	// Result constants.
	EventResult EventKind = iota + 1
	// EventClaimLapsed: a claim could not be extended in time and its
	// work's context was cancelled with Err (ErrClaimLapsed or
	// ErrNotOwner).
	EventClaimLapsed
)

func (k EventKind) String() string {
	switch k {
	case EventResult:
		return "result"
	case EventClaimLapsed:
		return "claim_lapsed"
	}
	return "EventKind(" + strconv.Itoa(int(k)) + ")"
}

// Event is what a Hook is told. Keys are never in it: Method and Path
// name a request (empty for a Runner's Do, whose Kind is RunnerKind).
type Event struct {
	Kind         EventKind
	Result       Result // for EventResult
	Cached       bool   // for EventResult with ResultReplayed: the replay cache answered, not the store
	Method, Path string
	RunnerKind   string
	Err          error // for EventClaimLapsed
}

// OnEvent counts an EventResult in idempotency_requests_total.
func (m *Metrics) OnEvent(_ context.Context, e Event) {
	if m == nil || e.Kind != EventResult {
		return
	}
	if e.Result < numResults {
		m.byResult[e.Result].Inc()
	}
	if e.Cached {
		m.cachedReplays.Inc()
	}
}

package overload

import (
	"context"
	"strconv"
)

// Hook observes a Limiter or a Shedder, in the shape of retryhttp.Hook's
// OnEvent: an event when a key's limit changes and one for each call
// refused. Options.Hooks take them, told in order; *Metrics is a Hook.
// OnEvent runs on the caller's goroutine, never under a lock, and must not
// block.
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
	// EventLimit: a key's limit (rounded down) is new (the key's first
	// call) or changed after a sample.
	EventLimit EventKind = iota + 1
	// EventRefused: a call was refused: a Limiter's queue was full or
	// its MaxWait passed, or a Shedder shed a request.
	EventRefused
)

func (k EventKind) String() string {
	switch k {
	case EventLimit:
		return "limit"
	case EventRefused:
		return "refused"
	}
	return "EventKind(" + strconv.Itoa(int(k)) + ")"
}

// Event is what a Hook is told. Limit and InFlight are the key's at the
// time of the event: a refusal's InFlight is what it was refused at, a
// limit change's is the calls still in flight after the sample.
type Event struct {
	Kind     EventKind
	Name     string   // Options.Name
	Key      string   // the key: a Transport's host; empty for a Shedder
	Priority Priority // an EventRefused's: the refused request's (a Shedder's from its header or context, a Limiter's from its context)
	Limit    int
	InFlight int
}

// tell reports e to each hook in order.
func tell(ctx context.Context, hooks []Hook, e Event) {
	for _, h := range hooks {
		h.OnEvent(ctx, e)
	}
}

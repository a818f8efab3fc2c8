package outbox

import (
	"context"
	"strconv"
)

// Hook observes a Relay, in the shape of retryhttp.Hook's OnEvent: an
// event for each delivery's outcome. RelayOptions.Hooks takes them, told in
// order; *Metrics is one. OnEvent runs on the relay's
// goroutines and must not block.
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
	// EventDelivered: the receiver accepted the message and the relay
	// recorded it.
	EventDelivered EventKind = iota + 1
	// EventRetried: the delivery failed; the message is tried again later.
	EventRetried
	// EventDead: the delivery failed and the message is given up (its
	// attempts are spent, or the receiver's answer is final).
	EventDead
)

func (k EventKind) String() string {
	switch k {
	case EventDelivered:
		return "delivered"
	case EventRetried:
		return "retried"
	case EventDead:
		return "dead"
	}
	return "EventKind(" + strconv.Itoa(int(k)) + ")"
}

// Event is what a Hook is told of one delivery.
type Event struct {
	Kind  EventKind
	Table string // the outbox table
	ID    string // the message ID, its Idempotency-Key
	// URL is the destination without query string or user information,
	// as logs show it; empty for EventDelivered.
	URL string
	// Status is the receiver's status code, 0 when none came back (or
	// its Sender has none).
	Status int
	// Deliveries counts the attempts made so far, this one included; 0
	// for EventDelivered.
	Deliveries int
	// Err is why the delivery failed ("the receiver answered 503" when
	// the status says it); nil for EventDelivered.
	Err error
}

// OnEvent counts e in outbox_deliveries_total. A nil *Metrics counts
// nothing.
func (m *Metrics) OnEvent(_ context.Context, e Event) {
	if m == nil {
		return
	}
	switch e.Kind {
	case EventDelivered:
		m.add(e.Table, outcomeDelivered, 1)
	case EventRetried:
		m.add(e.Table, outcomeRetried, 1)
	case EventDead:
		m.add(e.Table, outcomeDead, 1)
	}
}

// tell reports e to the relay's hooks.
func (r *Relay) tell(ctx context.Context, e Event) {
	e.Table = r.o.Outbox.table
	for _, h := range r.o.Hooks {
		h.OnEvent(ctx, e)
	}
}

package rabbitmq

import (
	"strconv"

	"github.com/retryhttp/retryhttp/queue"
)

// Hook observes a consumer, in the shape of retryhttp.Hook's OnEvent: an
// event for each delivery's outcome. OnEvent runs on the delivery's
// goroutine and must not block.
type Hook = queue.Hook[Event]

// HookFunc is a function that is a Hook.
type HookFunc = queue.HookFunc[Event]

// EventKind says what an Event reports.
type EventKind uint8

const (
	// EventProcessed: the handler ran and the delivery was acknowledged.
	EventProcessed EventKind = iota + 1
	// EventDuplicate: the key had run already; the stored result was
	// taken and the delivery acknowledged without running the handler.
	EventDuplicate
	// EventFailed: the handler failed (or the key was busy elsewhere); the
	// delivery was requeued after the Backoff's wait.
	EventFailed
	// EventRejected: the delivery has no key, or failed its last attempt;
	// it was rejected without requeue (dead-lettered, if the queue has a
	// dead-letter exchange).
	EventRejected
)

func (k EventKind) String() string {
	switch k {
	case EventProcessed:
		return "processed"
	case EventDuplicate:
		return "duplicate"
	case EventFailed:
		return "failed"
	case EventRejected:
		return "rejected"
	}
	return "EventKind(" + strconv.Itoa(int(k)) + ")"
}

// Event is what a Hook is told of one delivery.
type Event struct {
	Kind        EventKind
	RoutingKey  string
	Key         string
	Deliveries  int   // this delivery's count, as far as the broker says (see Options.MaxDeliveries)
	Redelivered bool  // the broker delivered it before
	Err         error // why it failed or was rejected
	AckErr      error // the acknowledgement's own error, if any
}

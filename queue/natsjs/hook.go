package natsjs

import (
	"strconv"

	"github.com/retryhttp/retryhttp/queue"
)

// Hook observes a consumer, in the shape of retryhttp.Hook's OnEvent: an
// event for each delivery's outcome. OnEvent runs on the message's
// goroutine and must not block.
type Hook = queue.Hook[Event]

// HookFunc is a function that is a Hook.
type HookFunc = queue.HookFunc[Event]

// EventKind says what an Event reports.
type EventKind uint8

const (
	// EventProcessed: the handler ran and the message was acknowledged.
	EventProcessed EventKind = iota + 1
	// EventDuplicate: the key had run already; the stored result was
	// taken and the message acknowledged without running the handler.
	EventDuplicate
	// EventFailed: the handler failed (or the key was busy elsewhere);
	// the message was negatively acknowledged, to be redelivered.
	EventFailed
	// EventTerminated: the message has no key, or failed its last
	// delivery; it was terminated (Term), for the stream's advisory.
	EventTerminated
)

func (k EventKind) String() string {
	switch k {
	case EventProcessed:
		return "processed"
	case EventDuplicate:
		return "duplicate"
	case EventFailed:
		return "failed"
	case EventTerminated:
		return "terminated"
	}
	return "EventKind(" + strconv.Itoa(int(k)) + ")"
}

// Event is what a Hook is told of one delivery.
type Event struct {
	Kind       EventKind
	Subject    string
	Key        string
	Deliveries int   // this delivery's number, 1 for the first; above 1, a redelivery
	Err        error // why it failed or was terminated
	AckErr     error // the acknowledgement's own error, if any
}

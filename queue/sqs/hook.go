package sqs

import (
	"strconv"

	"github.com/retryhttp/retryhttp/queue"
)

// Hook observes a Consumer, in the shape of retryhttp.Hook's OnEvent: an
// event for each message's outcome. OnEvent runs on the message's
// goroutine and must not block.
type Hook = queue.Hook[Event]

// HookFunc is a function that is a Hook.
type HookFunc = queue.HookFunc[Event]

// EventKind says what an Event reports.
type EventKind uint8

const (
	// EventProcessed: the handler ran, its result is stored, and the
	// message was deleted.
	EventProcessed EventKind = iota + 1
	// EventDuplicate: the key had run already; the stored result was
	// taken and the message deleted without running the handler.
	EventDuplicate
	// EventFailed: the handler failed (or the key was running
	// elsewhere); the message is visible again after its backoff.
	EventFailed
	// EventDead: the message has no key, failed at MaxAttempts, or its
	// handler returned queue.Permanent: moved to the dead-letter queue of
	// the queue's redrive policy, or deleted where there is none.
	EventDead
)

func (k EventKind) String() string {
	switch k {
	case EventProcessed:
		return "processed"
	case EventDuplicate:
		return "duplicate"
	case EventFailed:
		return "failed"
	case EventDead:
		return "dead"
	}
	return "EventKind(" + strconv.Itoa(int(k)) + ")"
}

// Event is what a Hook is told of one receive of a message.
type Event struct {
	Kind      EventKind
	MessageID string
	Key       string
	Receives  int   // the message's receive count, ApproximateReceiveCount
	Err       error // why it failed or ended
	SettleErr error // the delete's or the visibility change's own error, if any
}

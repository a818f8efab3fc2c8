package kafka

import (
	"strconv"

	"github.com/retryhttp/retryhttp/queue"
)

// Hook observes a Consumer, in the shape of retryhttp.Hook's OnEvent: an
// event for each attempt's outcome. OnEvent runs on the partition's
// goroutine and must not block.
type Hook = queue.Hook[Event]

// HookFunc is a function that is a Hook.
type HookFunc = queue.HookFunc[Event]

// EventKind says what an Event reports.
type EventKind uint8

const (
	// EventProcessed: the handler ran and its result is stored; the
	// record will be committed.
	EventProcessed EventKind = iota + 1
	// EventDuplicate: the key had run already; the stored result was
	// taken without running the handler.
	EventDuplicate
	// EventFailed: the handler failed (or the key was running elsewhere);
	// the record runs again after its backoff.
	EventFailed
	// EventDead: the record has no key, failed its last attempt, or its
	// handler returned queue.Permanent; it is in the dead-letter topic.
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

// Event is what a Hook is told of one attempt at a record.
type Event struct {
	Kind      EventKind
	Topic     string
	Partition int32
	Offset    int64
	Key       string
	Attempt   int   // this attempt's number in this process, 1 for the first
	Err       error // why it failed or is dead
}

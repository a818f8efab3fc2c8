package queue

import (
	"context"
	"strconv"
	"time"
)

// EventKind is a delivery's outcome: one vocabulary for every consumer,
// and the outcome label of queue_messages_total.
type EventKind uint8

const (
	// EventProcessed: the handler ran, its result is stored, and the
	// delivery was acknowledged (deleted, committed).
	EventProcessed EventKind = iota + 1
	// EventDuplicate: the key had run already; the stored result was
	// taken and the delivery acknowledged without running the handler.
	EventDuplicate
	// EventFailed: the handler failed, the key was running elsewhere
	// (idempotency.ErrInFlight), or the consumer was stopping; the
	// message runs again after Event.Wait.
	EventFailed
	// EventDead: the message cannot run: it has no key, its handler
	// returned Permanent, or it failed its MaxAttempts-th attempt. It was
	// handed to the broker's dead-letter path (a dead-letter topic or
	// queue, a terminated or rejected message) and does not run again.
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

// Event is what a Hook is told of one attempt at a message M (a
// jetstream.Msg, an amqp.Delivery, a *kgo.Record, an SQS types.Message):
// the same fields on every broker, the broker's own in Message.
type Event[M any] struct {
	Kind    EventKind
	Message M
	Key     string        // the message's key; "" when it has none
	Attempt int           // the attempt's number, 1 for the first (see Options.MaxAttempts of each consumer)
	Wait    time.Duration // EventFailed: the wait before the message runs again
	Err     error         // EventFailed, EventDead: why
	// SettleErr is the broker's error when the outcome was handed to it
	// (an ack, a redelivery, a dead letter): the message then comes back
	// on the broker's own terms, to meet its stored result.
	SettleErr error
}

// Hook observes a consumer, in the shape of retryhttp.Hook's OnEvent: an
// event for each attempt's outcome. OnEvent runs on the attempt's
// goroutine and must not block. queue/natsjs, queue/rabbitmq, queue/kafka
// and queue/sqs each name theirs Hook, for their own message type.
type Hook[M any] interface {
	OnEvent(ctx context.Context, e Event[M])
}

// HookFunc is a function that is a Hook.
type HookFunc[M any] func(ctx context.Context, e Event[M])

// OnEvent calls f.
func (f HookFunc[M]) OnEvent(ctx context.Context, e Event[M]) { f(ctx, e) }

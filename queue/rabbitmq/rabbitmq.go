// Package rabbitmq runs RabbitMQ deliveries exactly once per business key:
// it wraps a handler so that each delivery runs through an
// idempotency.Runner under the message's key. A duplicate (a redelivery
// after a consumer died before its ack, a second publish of the same
// event) gets the stored result and is acknowledged without running the
// handler; a failure releases the key, waits a delay from a
// queue.Backoff, and is negatively acknowledged with requeue, so that
// the broker delivers it again.
//
// RabbitMQ does not deduplicate: a publisher that republishes after a lost
// confirm, or a consumer killed between its effect and its ack, delivers a
// message twice; the Runner's store, shared by the consumers, makes the
// second a replay for as long as its Retention.
//
// The handler's context carries the key as the operation (through the
// Runner), so HTTP calls it makes through a retryhttp.Transport with
// InjectIdempotencyKey send the same derived keys on every delivery.
//
// Failures that no redelivery fixes are bounded. A handler that panics has
// failed its run: the panic is recovered (a queue.PanicError, logged with
// its stack), the key released and the delivery requeued after its
// backoff, while the consumer goes on. A handler that knows a message can
// never succeed returns queue.Permanent(err), and the delivery is rejected
// at once. On a quorum queue the delivery count (x-delivery-count) is
// checked before the handler runs: a delivery past Options.MaxAttempts is
// rejected without running again, however its earlier deliveries ended. A
// classic queue keeps no delivery count (see Options.MaxAttempts). The
// rules are package queue's, the same for every consumer.
//
// Timing. The backoff of a failed delivery is waited in the handler's
// goroutine before the requeue, so it holds one of the channel's prefetch
// slots for up to Backoff.Max: set the prefetch above the number of
// failures you expect at once, and call the handler from that many
// goroutines. A delay without a held slot takes a retry queue with a
// message TTL that dead-letters back to the work queue, topology this
// package does not own: declare it and publish failures there from your
// handler if your failures are many and slow. A delivery that runs longer
// than the broker's consumer timeout (consumer_timeout, 30 minutes by
// default) has its channel closed and is redelivered; a redelivery that
// meets its key still running elsewhere waits up to the Runner's MaxWait,
// then is requeued with a backoff (queue.EventFailed,
// idempotency.ErrInFlight), and never rejected for it.
package rabbitmq

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/retryhttp/retryhttp/idempotency"
	"github.com/retryhttp/retryhttp/queue"
)

// Options configure Handler. Runner, Key, MaxAttempts, Backoff, Logger and
// Hooks are every consumer's, with the same zero values (queue.Config).
type Options struct {
	// Runner runs each delivery once per key. Required; its Store is
	// where the keys are kept (a shared store, for consumers in many
	// processes), and its Retention must exceed the longest redelivery
	// delay.
	Runner *idempotency.Runner
	// Key returns a delivery's business key. nil means its MessageId. A
	// delivery for which it returns an error (the default's: no
	// message-id) is rejected without requeue (dead-lettered, if the queue
	// has a dead-letter exchange), the error logged, and the handler does
	// not run: it cannot be deduplicated.
	Key func(amqp.Delivery) (string, error)
	// MaxAttempts, where the count is known (a quorum queue's
	// x-delivery-count), is the delivery at which a failed delivery is
	// rejected without requeue; a delivery already past it (its consumers
	// crashed on it) is rejected without running the handler, unless its
	// key has run, when it is acknowledged as a duplicate. 0 means
	// queue.DefaultMaxAttempts. A classic queue keeps no count: there
	// MaxAttempts does not apply, and a delivery that always fails is
	// requeued until a handler returns queue.Permanent (or the queue's own
	// policy drops it).
	MaxAttempts int
	// Backoff gives the wait before a failed delivery is requeued, by its
	// delivery count (x-delivery-count on quorum queues; otherwise 1, or 2
	// once redelivered); the zero Backoff waits up to 1 s, then 2 s, ...
	// up to 1 min, with full jitter.
	Backoff queue.Backoff
	// Logger gets failures and rejections; nil means slog.Default().
	Logger *slog.Logger
	// Hooks are told each delivery's outcome.
	Hooks []Hook
}

// Event is what a Hook is told of one delivery; Message is the delivery
// itself.
type Event = queue.Event[amqp.Delivery]

// Hook observes a consumer: an event for each delivery's outcome. OnEvent
// runs on the delivery's goroutine and must not block.
type Hook = queue.Hook[amqp.Delivery]

// HookFunc is a function that is a Hook.
type HookFunc = queue.HookFunc[amqp.Delivery]

// Metrics counts a consumer's deliveries into package queue's series,
// with broker="rabbitmq". It is a Hook: put it in Options.Hooks.
type Metrics = queue.Metrics[amqp.Delivery]

// NewMetrics registers the counters on reg for the consumer named
// consumer (its queue, say); several consumers on one registry share
// them, labelled by consumer.
func NewMetrics(reg prometheus.Registerer, consumer string) (*Metrics, error) {
	return queue.NewMetrics[amqp.Delivery](reg, "rabbitmq", consumer)
}

// Handler returns the function to call with each delivery of a channel
// consumed without auto-ack. It runs h once per key, acknowledging what
// ran or was a duplicate; it waits and requeues what failed, so call it
// from as many goroutines as the channel's prefetch allows.
func Handler(o Options, h func(ctx context.Context, d amqp.Delivery) ([]byte, error)) (func(ctx context.Context, d amqp.Delivery), error) {
	if o.Key == nil {
		o.Key = messageID
	}
	core, err := queue.NewCore(queue.Config[amqp.Delivery]{Broker: "rabbitmq", Runner: o.Runner, Key: o.Key, MaxAttempts: o.MaxAttempts,
		Backoff: o.Backoff, Logger: o.Logger, Hooks: o.Hooks, Handler: h})
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, d amqp.Delivery) { core.Process(ctx, delivery{d}) }, nil
}

func messageID(d amqp.Delivery) (string, error) {
	if d.MessageId != "" {
		return d.MessageId, nil
	}
	return "", errors.New("the delivery has no message-id")
}

// delivery is an AMQP delivery as package queue settles it: Ack, Nack
// with requeue after the wait, Reject without requeue.
type delivery struct{ d amqp.Delivery }

func (d delivery) Message() amqp.Delivery { return d.d }

// Attempt is the delivery's count, counted where the broker keeps it
// (x-delivery-count, on a quorum queue).
func (d delivery) Attempt() (int, bool) {
	switch v := d.d.Headers["x-delivery-count"].(type) {
	case int64:
		return int(min(v, 1<<31)) + 1, true
	case int32:
		return int(v) + 1, true
	case int:
		return v + 1, true
	}
	if d.d.Redelivered {
		return 2, false
	}
	return 1, false
}

func (d delivery) Ack(context.Context) error { return d.d.Ack(false) }

// Retry waits in the caller's goroutine, holding its prefetch slot:
// RabbitMQ has no delayed requeue.
func (d delivery) Retry(ctx context.Context, wait time.Duration) error {
	queue.Sleep(ctx, wait)
	return d.d.Nack(false, true)
}

func (d delivery) End(context.Context, error) error { return d.d.Reject(false) }
func (d delivery) Renew(context.Context)            {}
func (d delivery) LogAttrs() []slog.Attr {
	return []slog.Attr{slog.String("routing_key", d.d.RoutingKey)}
}

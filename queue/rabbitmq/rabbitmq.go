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
// at once. On a quorum queue, with Options.MaxDeliveries, the delivery count
// (x-delivery-count) is checked before the handler runs: a delivery past
// it is rejected without running again, however its earlier deliveries
// ended. A classic queue keeps no delivery count (see Options.MaxDeliveries).
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
// then is requeued with a backoff (EventFailed, idempotency.ErrInFlight).
package rabbitmq

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/retryhttp/retryhttp/idempotency"
	"github.com/retryhttp/retryhttp/queue"
)

// Options configure Handler.
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
	// MaxDeliveries, if set and the count is known (a quorum queue's
	// x-delivery-count), rejects a delivery without requeue after that
	// many; a delivery already past it (its consumers crashed on it) is
	// rejected without running the handler, unless its key has run, when
	// it is acknowledged as a duplicate. A classic queue keeps no count:
	// there MaxDeliveries does not apply, and a delivery that always fails
	// is requeued until a handler returns queue.Permanent (or the queue's
	// own policy drops it). 0 means no bound.
	MaxDeliveries int
	// Backoff gives the wait before a failed delivery is requeued, by its
	// delivery count (x-delivery-count on quorum queues; otherwise 1, or 2
	// once redelivered); the zero Backoff waits up to 1 s, then 2 s, ...
	// up to 1 min, with full jitter.
	Backoff queue.Backoff
	// Logger gets failures and rejections; nil means slog.Default().
	Logger *slog.Logger
	// Hooks are told each delivery's outcome (see Hook).
	Hooks []Hook
}

// Handler returns the function to call with each delivery of a channel
// consumed without auto-ack. It runs h once per key, acknowledging what
// ran or was a duplicate; it waits and requeues what failed, so call it
// from as many goroutines as the channel's prefetch allows.
func Handler(o Options, h func(ctx context.Context, d amqp.Delivery) ([]byte, error)) (func(ctx context.Context, d amqp.Delivery), error) {
	switch {
	case o.Runner == nil:
		return nil, errors.New("rabbitmq: nil Runner")
	case h == nil:
		return nil, errors.New("rabbitmq: nil handler")
	}
	if o.MaxDeliveries < 0 {
		return nil, fmt.Errorf("rabbitmq: MaxDeliveries %d is negative", o.MaxDeliveries)
	}
	if err := o.Backoff.Validate(); err != nil {
		return nil, fmt.Errorf("rabbitmq: %w", err)
	}
	if o.Key == nil {
		o.Key = messageID
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	c := &consumer{o: o, h: h}
	return c.handle, nil
}

type consumer struct {
	o Options
	h func(ctx context.Context, d amqp.Delivery) ([]byte, error)
}

func messageID(d amqp.Delivery) (string, error) {
	if d.MessageId != "" {
		return d.MessageId, nil
	}
	return "", errors.New("the delivery has no message-id")
}

// deliveries is a delivery's count, 1 for the first, and whether the
// broker said it exactly.
func deliveries(d amqp.Delivery) (n int64, exact bool) {
	switch v := d.Headers["x-delivery-count"].(type) {
	case int64:
		return v + 1, true
	case int32:
		return int64(v) + 1, true
	case int:
		return int64(v) + 1, true
	}
	if d.Redelivered {
		return 2, false
	}
	return 1, false
}

func (c *consumer) handle(ctx context.Context, d amqp.Delivery) {
	n, exact := deliveries(d)
	e := Event{RoutingKey: d.RoutingKey, Deliveries: int(n), Redelivered: d.Redelivered}
	key, err := c.o.Key(d)
	if err != nil {
		e.Kind, e.Err = EventRejected, err
		c.o.Logger.LogAttrs(ctx, slog.LevelError, "rabbitmq: delivery rejected: no key", slog.String("routing_key", d.RoutingKey), slog.String("error", err.Error()))
		c.tell(ctx, e, d.Reject(false))
		return
	}
	e.Key = key
	maxDeliveries := int64(c.o.MaxDeliveries)
	past := exact && maxDeliveries > 0 && n > maxDeliveries // a delivery that crashed its consumers, or failed too often
	_, replayed, err := c.o.Runner.Do(ctx, key, func(ctx context.Context) ([]byte, error) {
		if past {
			return nil, fmt.Errorf("rabbitmq: delivery %d is past MaxDeliveries %d: not run", n, maxDeliveries)
		}
		return queue.Run(func() ([]byte, error) { return c.h(ctx, d) })
	})
	switch {
	case err == nil:
		e.Kind = EventProcessed
		if replayed {
			e.Kind = EventDuplicate
		}
		c.tell(ctx, e, d.Ack(false))
	case past || queue.IsPermanent(err) || exact && maxDeliveries > 0 && n >= maxDeliveries:
		e.Kind, e.Err = EventRejected, err
		c.o.Logger.LogAttrs(ctx, slog.LevelError, "rabbitmq: delivery rejected", queue.FailureAttrs(key, e.Deliveries, err)...)
		c.tell(ctx, e, d.Reject(false))
	default:
		e.Kind, e.Err = EventFailed, err
		wait := c.o.Backoff.Wait(int(min(n, 1<<20)), rand.Float64())
		c.o.Logger.LogAttrs(ctx, slog.LevelWarn, "rabbitmq: delivery failed; requeuing", append(queue.FailureAttrs(key, e.Deliveries, err), slog.String("after", wait.String()))...)
		queue.Sleep(ctx, wait)
		c.tell(ctx, e, d.Nack(false, true))
	}
}

// tell reports e, with its acknowledgement's error if any, to the hooks.
func (c *consumer) tell(ctx context.Context, e Event, ackErr error) {
	if ackErr != nil {
		e.AckErr = ackErr
		c.o.Logger.LogAttrs(ctx, slog.LevelWarn, "rabbitmq: acknowledging failed; the broker will deliver it again", slog.String("key", e.Key),
			slog.String("error", ackErr.Error()))
	}
	for _, h := range c.o.Hooks {
		h.OnEvent(ctx, e)
	}
}

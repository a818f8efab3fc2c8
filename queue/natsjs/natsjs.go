// Package natsjs runs NATS JetStream messages exactly once per business
// key: it wraps a handler so that each delivery runs through an
// idempotency.Runner under the message's key. A duplicate (a redelivery
// after a lost ack, a second publish of the same event) gets the stored
// result and is acknowledged without running the handler; a failure
// releases the key and is negatively acknowledged with a delay from a
// retryhttp.Policy, so that JetStream redelivers it.
//
// JetStream's own deduplication (Nats-Msg-Id within the stream's duplicate
// window, two minutes by default) drops a second publish of one message ID
// inside that window only; the Runner's store keeps keys for its
// Retention, so a message republished later, or an event published twice
// under two IDs but one business key, still runs once.
//
// The handler's context carries the key as the operation
// (idempotency.WithOperationKey, through the Runner), so HTTP calls it makes
// through a retryhttp.Transport with InjectIdempotencyKey send keys derived
// from it: the same keys on every redelivery.
package natsjs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/retryhttp/retryhttp"
	"github.com/retryhttp/retryhttp/idempotency"
)

// Options configure Handler.
type Options struct {
	// Runner runs each message once per key. Required: its Store is where
	// the keys are kept (a shared store, for consumers in many processes),
	// and its Retention must exceed the longest redelivery delay.
	Runner *idempotency.Runner
	// Key returns a message's business key. nil means its Nats-Msg-Id
	// header, and a message without one is terminated (Term) with an
	// error logged: it cannot be deduplicated.
	Key func(jetstream.Msg) (string, error)
	// Policy gives the delay of a redelivery after a failure: Backoff of
	// the delivery count. Its zero fields mean 1 s and 1 min, FullJitter.
	// MaxAttempts, if set, terminates a message that failed that many
	// deliveries, for the stream's dead-letter advisory.
	Policy retryhttp.Policy
	// Logger gets failures and terminations; nil means slog.Default().
	Logger *slog.Logger
	// Hooks are told each delivery's outcome (see Hook).
	Hooks []Hook
}

// Handler returns a jetstream.MessageHandler (for Consumer.Consume) that
// runs h once per key, acknowledging what ran or was a duplicate, and
// negatively acknowledging, with a delay, what failed.
func Handler(o Options, h func(ctx context.Context, msg jetstream.Msg) ([]byte, error)) (jetstream.MessageHandler, error) {
	c, err := newConsumer(o, h)
	if err != nil {
		return nil, err
	}
	return func(msg jetstream.Msg) { c.handle(context.Background(), msg) }, nil
}

type consumer struct {
	o Options
	h func(ctx context.Context, msg jetstream.Msg) ([]byte, error)
}

func newConsumer(o Options, h func(ctx context.Context, msg jetstream.Msg) ([]byte, error)) (*consumer, error) {
	switch {
	case o.Runner == nil:
		return nil, errors.New("natsjs: nil Runner")
	case h == nil:
		return nil, errors.New("natsjs: nil handler")
	}
	if err := o.Policy.Validate(); err != nil {
		return nil, fmt.Errorf("natsjs: %w", err)
	}
	if o.Policy.BaseDelay == 0 {
		o.Policy.BaseDelay = time.Second
	}
	if o.Policy.MaxDelay == 0 {
		o.Policy.MaxDelay = time.Minute
	}
	if o.Key == nil {
		o.Key = msgID
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return &consumer{o: o, h: h}, nil
}

// msgID is the default key: the Nats-Msg-Id header.
func msgID(m jetstream.Msg) (string, error) {
	if id := m.Headers().Get(jetstream.MsgIDHeader); id != "" {
		return id, nil
	}
	return "", errors.New("the message has no " + jetstream.MsgIDHeader + " header")
}

func (c *consumer) handle(ctx context.Context, msg jetstream.Msg) {
	var deliveries uint64 = 1
	if md, err := msg.Metadata(); err == nil {
		deliveries = md.NumDelivered
	}
	e := Event{Subject: msg.Subject(), Deliveries: deliveries}
	key, err := c.o.Key(msg)
	if err != nil {
		e.Kind, e.Err = EventTerminated, err
		c.o.Logger.LogAttrs(ctx, slog.LevelError, "natsjs: message terminated: no key", slog.String("subject", msg.Subject()), slog.String("error", err.Error()))
		c.tell(ctx, e, msg.Term())
		return
	}
	e.Key = key
	_, replayed, err := c.o.Runner.Do(ctx, key, func(ctx context.Context) ([]byte, error) { return c.h(ctx, msg) })
	switch {
	case err == nil:
		e.Kind = EventProcessed
		if replayed {
			e.Kind = EventDuplicate
		}
		c.tell(ctx, e, msg.Ack())
	case c.o.Policy.MaxAttempts > 0 && deliveries >= uint64(c.o.Policy.MaxAttempts):
		e.Kind, e.Err = EventTerminated, err
		c.o.Logger.LogAttrs(ctx, slog.LevelError, "natsjs: message terminated after its last delivery", slog.String("key", key),
			slog.String("deliveries", strconv.FormatUint(deliveries, 10)), slog.String("error", err.Error()))
		c.tell(ctx, e, msg.Term())
	default:
		e.Kind, e.Err = EventFailed, err
		wait := c.o.Policy.Backoff(int(min(deliveries, 1<<20))-1, 0, rand.Float64())
		c.o.Logger.LogAttrs(ctx, slog.LevelWarn, "natsjs: message failed; redelivering", slog.String("key", key),
			slog.String("in", wait.String()), slog.String("error", err.Error()))
		c.tell(ctx, e, msg.NakWithDelay(wait))
	}
}

// tell reports e, with the error of its acknowledgement if any, to the
// hooks.
func (c *consumer) tell(ctx context.Context, e Event, ackErr error) {
	if ackErr != nil {
		e.AckErr = ackErr
		c.o.Logger.LogAttrs(ctx, slog.LevelWarn, "natsjs: acknowledging failed; the message will be redelivered", slog.String("key", e.Key),
			slog.String("error", ackErr.Error()))
	}
	for _, h := range c.o.Hooks {
		h.OnEvent(ctx, e)
	}
}

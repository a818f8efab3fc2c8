// Package natsjs runs NATS JetStream messages exactly once per business
// key: it wraps a handler so that each delivery runs through an
// idempotency.Runner under the message's key. A duplicate (a redelivery
// after a lost ack, a second publish of the same event) gets the stored
// result and is acknowledged without running the handler; a failure
// releases the key and is negatively acknowledged with a delay from a
// queue.Backoff, so that JetStream redelivers it.
//
// JetStream's own deduplication (Nats-Msg-Id within the stream's duplicate
// window, two minutes by default) drops a second publish of one message ID
// inside that window only; the Runner's store keeps keys for its
// Retention, so a message republished later, or an event published twice
// under two IDs but one business key, still runs once.
//
// The handler's context carries the key as the operation (through the
// Runner, as retryhttp.WithOperationKey sets one), so HTTP calls it makes
// through a retryhttp.Transport with InjectIdempotencyKey send keys derived
// from it: the same keys on every redelivery.
//
// Failures that no redelivery fixes are bounded. A handler that panics has
// failed its run: the panic is recovered (a queue.PanicError, logged with
// its stack), the key released and the message redelivered with a backoff,
// while the consumer goes on with the messages behind it. A handler that
// knows a message can never succeed returns queue.Permanent(err), and the
// message is terminated at once. With Options.MaxDeliveries, the delivery
// count (NumDelivered) is checked before the handler runs: a message past
// it is terminated without running again, however its earlier deliveries
// ended.
//
// Timing. A delivery keeps its message while it runs, however long: it is
// marked in progress every Options.AckWait/3, and the Runner extends its
// claim every LockTimeout/3. A redelivery that meets the same key running
// elsewhere waits up to the Runner's MaxWait, then is negatively
// acknowledged with a backoff (EventFailed, idempotency.ErrInFlight). So a
// consumer process that dies mid-run has its message redelivered after
// AckWait, and that delivery runs the handler once the dead claim lapses,
// LockTimeout after its last extension: keep AckWait at or below
// LockTimeout, and MaxWait at LockTimeout (its default) so that the
// redelivery waits the lapse out rather than spending a delivery.
package natsjs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/retryhttp/retryhttp/idempotency"
	"github.com/retryhttp/retryhttp/queue"
)

// Options configure Handler.
type Options struct {
	// Runner runs each message once per key. Required: its Store is where
	// the keys are kept (a shared store, for consumers in many processes),
	// and its Retention must exceed the longest redelivery delay.
	Runner *idempotency.Runner
	// Key returns a message's business key. nil means its Nats-Msg-Id
	// header. A message for which it returns an error (the default's: no
	// header) is terminated (Term) with the error logged, and the handler
	// does not run: it cannot be deduplicated.
	Key func(jetstream.Msg) (string, error)
	// MaxDeliveries, if set, terminates a message that failed that many
	// deliveries, for the stream's dead-letter advisory; a delivery
	// already past it (its consumers crashed on it) is terminated without
	// running the handler, unless its key has run, when it is acknowledged
	// as a duplicate. 0 means no bound: a message that always fails is
	// redelivered until a handler returns queue.Permanent (or the
	// consumer's MaxDeliver ends it).
	MaxDeliveries int
	// Backoff gives the delay of a redelivery after a failure, by the
	// delivery count; the zero Backoff waits up to 1 s, then 2 s, ... up
	// to 1 min, with full jitter.
	Backoff queue.Backoff
	// AckWait is the consumer's AckWait: while a delivery runs, it is
	// marked in progress every AckWait/3, so that JetStream does not
	// redeliver it to another consumer meanwhile. 0 means JetStream's
	// default, 30 s.
	AckWait time.Duration
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
	if o.MaxDeliveries < 0 {
		return nil, fmt.Errorf("natsjs: MaxDeliveries %d is negative", o.MaxDeliveries)
	}
	if err := o.Backoff.Validate(); err != nil {
		return nil, fmt.Errorf("natsjs: %w", err)
	}
	if o.Key == nil {
		o.Key = msgID
	}
	if o.AckWait < 0 {
		return nil, fmt.Errorf("natsjs: AckWait %v is negative", o.AckWait)
	}
	if o.AckWait == 0 {
		o.AckWait = 30 * time.Second
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
	e := Event{Subject: msg.Subject(), Deliveries: int(min(deliveries, 1<<31))}
	key, err := c.o.Key(msg)
	if err != nil {
		e.Kind, e.Err = EventTerminated, err
		c.o.Logger.LogAttrs(ctx, slog.LevelError, "natsjs: message terminated: no key", slog.String("subject", msg.Subject()), slog.String("error", err.Error()))
		c.tell(ctx, e, msg.Term())
		return
	}
	e.Key = key
	maxDeliveries := uint64(c.o.MaxDeliveries)
	past := maxDeliveries > 0 && deliveries > maxDeliveries // a message that crashed its consumers, or failed too often
	stop := c.progress(msg)
	_, replayed, err := c.o.Runner.Do(ctx, key, func(ctx context.Context) ([]byte, error) {
		if past {
			return nil, fmt.Errorf("natsjs: delivery %d is past MaxDeliveries %d: not run", deliveries, maxDeliveries)
		}
		return queue.Run(func() ([]byte, error) { return c.h(ctx, msg) })
	})
	stop()
	switch {
	case err == nil:
		e.Kind = EventProcessed
		if replayed {
			e.Kind = EventDuplicate
		}
		c.tell(ctx, e, msg.Ack())
	case past || queue.IsPermanent(err) || maxDeliveries > 0 && deliveries >= maxDeliveries:
		e.Kind, e.Err = EventTerminated, err
		c.o.Logger.LogAttrs(ctx, slog.LevelError, "natsjs: message terminated", queue.FailureAttrs(key, e.Deliveries, err)...)
		c.tell(ctx, e, msg.Term())
	default:
		e.Kind, e.Err = EventFailed, err
		wait := c.o.Backoff.Wait(int(min(deliveries, 1<<20)), rand.Float64())
		c.o.Logger.LogAttrs(ctx, slog.LevelWarn, "natsjs: message failed; redelivering", append(queue.FailureAttrs(key, e.Deliveries, err), slog.String("in", wait.String()))...)
		c.tell(ctx, e, msg.NakWithDelay(wait))
	}
}

// progress tells JetStream, every AckWait/3 until the returned func is
// called, that msg is still being worked on (InProgress), so that a run
// longer than AckWait (a slow handler, or a wait for the same key's run
// elsewhere, up to the Runner's MaxWait) keeps its message instead of
// having it redelivered meanwhile.
func (c *consumer) progress(msg jetstream.Msg) (stop func()) {
	every := c.o.AckWait / 3
	var mu sync.Mutex
	stopped := false
	var t *time.Timer
	mu.Lock() // t is set before the first tick reads it
	defer mu.Unlock()
	t = time.AfterFunc(every, func() {
		mu.Lock()
		defer mu.Unlock()
		if stopped {
			return
		}
		msg.InProgress()
		t.Reset(every)
	})
	return func() {
		mu.Lock()
		stopped = true
		mu.Unlock()
		t.Stop()
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

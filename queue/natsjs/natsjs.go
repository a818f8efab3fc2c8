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
// message is terminated at once. The delivery count (NumDelivered) is
// checked before the handler runs: a message past Options.MaxAttempts is
// terminated without running again, however its earlier deliveries ended.
// The rules are package queue's, the same for every consumer.
//
// Timing. A delivery keeps its message while it runs, however long: it is
// marked in progress every Options.AckWait/3, and the Runner extends its
// claim every LockTimeout/3. A redelivery that meets the same key running
// elsewhere waits up to the Runner's MaxWait, then is negatively
// acknowledged with a backoff (queue.EventFailed, idempotency.ErrInFlight),
// and never terminated for it. So a
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
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/retryhttp/retryhttp/idempotency"
	"github.com/retryhttp/retryhttp/queue"
)

// Options configure Handler. Runner, Key, MaxAttempts, Backoff, Logger and
// Hooks are every consumer's, with the same zero values (queue.Config).
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
	// MaxAttempts is the delivery (NumDelivered) at which a failed message
	// is terminated, for the stream's dead-letter advisory; a delivery
	// already past it (its consumers crashed on it) is terminated without
	// running the handler, unless its key has run, when it is acknowledged
	// as a duplicate. 0 means queue.DefaultMaxAttempts. JetStream counts
	// every delivery, a killed consumer's and one that met its key running
	// elsewhere too: size MaxAttempts for the crashes you expect, and keep
	// the consumer's own MaxDeliver above it, or unbounded.
	MaxAttempts int
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
	// Hooks are told each delivery's outcome.
	Hooks []Hook
}

// Event is what a Hook is told of one delivery; Message is the delivery
// itself.
type Event = queue.Event[jetstream.Msg]

// Hook observes a consumer: an event for each delivery's outcome. OnEvent
// runs on the message's goroutine and must not block.
type Hook = queue.Hook[jetstream.Msg]

// HookFunc is a function that is a Hook.
type HookFunc = queue.HookFunc[jetstream.Msg]

// Metrics counts a consumer's deliveries into package queue's series,
// with broker="nats". It is a Hook: put it in Options.Hooks.
type Metrics = queue.Metrics[jetstream.Msg]

// NewMetrics registers the counters on reg for the consumer named
// consumer (a stream's durable consumer, say); several consumers on one
// registry share them, labelled by consumer.
func NewMetrics(reg prometheus.Registerer, consumer string) (*Metrics, error) {
	return queue.NewMetrics[jetstream.Msg](reg, "nats", consumer)
}

// Handler returns a jetstream.MessageHandler (for Consumer.Consume) that
// runs h once per key, acknowledging what ran or was a duplicate, and
// negatively acknowledging, with a delay, what failed.
func Handler(o Options, h func(ctx context.Context, msg jetstream.Msg) ([]byte, error)) (jetstream.MessageHandler, error) {
	if o.AckWait < 0 {
		return nil, fmt.Errorf("natsjs: AckWait %v is negative", o.AckWait)
	}
	if o.AckWait == 0 {
		o.AckWait = 30 * time.Second
	}
	if o.Key == nil {
		o.Key = msgID
	}
	core, err := queue.NewCore(queue.Config[jetstream.Msg]{Broker: "natsjs", Runner: o.Runner, Key: o.Key, MaxAttempts: o.MaxAttempts,
		Backoff: o.Backoff, RenewEvery: o.AckWait / 3, Logger: o.Logger, Hooks: o.Hooks, Handler: h})
	if err != nil {
		return nil, err
	}
	return func(msg jetstream.Msg) { core.Process(context.Background(), delivery{msg}) }, nil
}

// msgID is the default key: the Nats-Msg-Id header.
func msgID(m jetstream.Msg) (string, error) {
	if id := m.Headers().Get(jetstream.MsgIDHeader); id != "" {
		return id, nil
	}
	return "", errors.New("the message has no " + jetstream.MsgIDHeader + " header")
}

// delivery is a JetStream message as package queue settles it: Ack, Nak
// with a delay, Term.
type delivery struct{ msg jetstream.Msg }

func (d delivery) Message() jetstream.Msg { return d.msg }

// Attempt is NumDelivered, which JetStream counts across consumers.
func (d delivery) Attempt() (int, bool) {
	md, err := d.msg.Metadata()
	if err != nil {
		return 1, false
	}
	return int(min(md.NumDelivered, 1<<31)), true
}

func (d delivery) Ack(context.Context) error                      { return d.msg.Ack() }
func (d delivery) Retry(_ context.Context, w time.Duration) error { return d.msg.NakWithDelay(w) }
func (d delivery) End(context.Context, error) error               { return d.msg.Term() }

// Renew marks the message in progress, so that a run longer than AckWait
// (a slow handler, or a wait for the same key's run elsewhere, up to the
// Runner's MaxWait) keeps its message.
func (d delivery) Renew(context.Context) { d.msg.InProgress() }

func (d delivery) LogAttrs() []slog.Attr { return []slog.Attr{slog.String("subject", d.msg.Subject())} }

package queue

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/retryhttp/retryhttp/idempotency"
)

// DefaultMaxAttempts is the MaxAttempts of every consumer whose
// Options.MaxAttempts is 0.
const DefaultMaxAttempts = 5

// Delivery is one delivery of a message M, as a broker's consumer hands it
// to [Core.Process]: the message, its count, and how the broker is told
// the outcome. Process calls exactly one of Ack, Retry or End.
type Delivery[M any] interface {
	Message() M
	// Attempt is the attempt's number, 1 for the first, and whether it is
	// counted: a count the broker keeps across consumers (or, for Kafka,
	// the consumer keeps in place) bounds the message by MaxAttempts; a
	// guess (a classic RabbitMQ queue's) does not.
	Attempt() (n int, counted bool)
	// Ack tells the broker the message is done: its outcome is stored.
	Ack(ctx context.Context) error
	// Retry has the message run again after wait.
	Retry(ctx context.Context, wait time.Duration) error
	// End hands the message to the broker's dead-letter path, for err.
	End(ctx context.Context, err error) error
	// Renew tells the broker the message is still running, so that it
	// does not hand it to another consumer meanwhile; Process calls it
	// every Config.RenewEvery while the handler runs.
	Renew(ctx context.Context)
	// LogAttrs name the message in a log record (its subject, topic and
	// offset, or ID).
	LogAttrs() []slog.Attr
}

// Config is what a consumer hands [NewCore]: its Options' shared fields,
// under the same names and zero values in every consumer, and its handler.
type Config[M any] struct {
	// Broker names the consumer's package in log records and errors:
	// "natsjs", "rabbitmq", "kafka", "sqs".
	Broker string
	// Runner runs each message once per key. Required; its Store is where
	// the keys are kept (a shared store, for consumers in many
	// processes), and its Retention must exceed the longest redelivery.
	Runner *idempotency.Runner
	// Key returns a message's business key. Required here: each consumer
	// passes its Options.Key, or its broker's default.
	Key func(M) (string, error)
	// MaxAttempts is the counted attempt at which a failed message ends.
	// 0 means DefaultMaxAttempts.
	MaxAttempts int
	// Backoff gives the wait before a failed message runs again, by its
	// attempt; the zero Backoff waits up to 1 s, then 2 s, ... up to
	// 1 min, with full jitter.
	Backoff Backoff
	// RunPast runs a delivery counted past MaxAttempts (its consumers died
	// on it) as any other, for a broker that bounds those redeliveries
	// itself (SQS's redrive maxReceiveCount); false ends it unrun.
	RunPast bool
	// RenewEvery is how often a running message is renewed (Delivery's
	// Renew); 0 means never.
	RenewEvery time.Duration
	// Logger gets failures and dead messages; nil means slog.Default().
	Logger *slog.Logger
	// Hooks are told each attempt's outcome.
	Hooks []Hook[M]
	// Handler runs a message; its result is stored under the message's
	// key and handed to the key's duplicates. Required.
	Handler func(ctx context.Context, m M) ([]byte, error)
}

// Core runs the deliveries of one consumer. It is safe for concurrent
// use.
type Core[M any] struct{ c Config[M] }

// NewCore checks c and fills its zero fields: the errors are the ones
// every consumer's constructor returns, with the broker's name.
func NewCore[M any](c Config[M]) (*Core[M], error) {
	switch {
	case c.Runner == nil:
		return nil, fmt.Errorf("%s: nil Runner", c.Broker)
	case c.Handler == nil:
		return nil, fmt.Errorf("%s: nil handler", c.Broker)
	case c.Key == nil:
		return nil, fmt.Errorf("%s: nil Key", c.Broker)
	case c.MaxAttempts < 0:
		return nil, fmt.Errorf("%s: MaxAttempts %d is negative", c.Broker, c.MaxAttempts)
	case c.RenewEvery < 0:
		return nil, fmt.Errorf("%s: a negative renewal interval %v", c.Broker, c.RenewEvery)
	}
	if err := c.Backoff.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", c.Broker, err)
	}
	if c.MaxAttempts == 0 {
		c.MaxAttempts = DefaultMaxAttempts
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return &Core[M]{c: c}, nil
}

// Process runs d once per key and settles it by its outcome (see the
// package doc for the rules), tells the hooks, and returns what it told
// them.
func (c *Core[M]) Process(ctx context.Context, d Delivery[M]) Event[M] {
	m := d.Message()
	n, counted := d.Attempt()
	e := Event[M]{Message: m, Attempt: n}
	key, err := c.c.Key(m)
	if err == nil && key == "" {
		err = errors.New("the key is empty")
	}
	if err != nil {
		e.Kind, e.Err = EventDead, fmt.Errorf("%s: no key: %w", c.c.Broker, err)
		return c.end(ctx, d, e)
	}
	e.Key = key
	past := counted && n > c.c.MaxAttempts && !c.c.RunPast // its consumers died on it, or it failed too often
	stop := c.renew(ctx, d)
	_, replayed, err := c.c.Runner.Do(ctx, key, func(ctx context.Context) ([]byte, error) {
		if past {
			return nil, fmt.Errorf("%s: attempt %d is past MaxAttempts %d: not run", c.c.Broker, n, c.c.MaxAttempts)
		}
		return run(func() ([]byte, error) { return c.c.Handler(ctx, m) })
	})
	stop()
	// Neither a run elsewhere nor our own stopping is the message's
	// failure: they never end it.
	notOurs := errors.Is(err, idempotency.ErrInFlight) || ctx.Err() != nil
	switch {
	case err == nil:
		e.Kind = EventProcessed
		if replayed {
			e.Kind = EventDuplicate
		}
		e.SettleErr = d.Ack(ctx)
	case !notOurs && (past || IsPermanent(err) || counted && n >= c.c.MaxAttempts):
		e.Kind, e.Err = EventDead, err
		return c.end(ctx, d, e)
	default:
		e.Kind, e.Err = EventFailed, err
		if ctx.Err() == nil {
			e.Wait = c.c.Backoff.Wait(n, rand.Float64())
		}
		c.c.Logger.LogAttrs(ctx, slog.LevelWarn, c.c.Broker+": message failed; it runs again after its backoff",
			append(c.attrs(d, e), slog.String("after", e.Wait.String()))...)
		e.SettleErr = d.Retry(ctx, e.Wait)
	}
	return c.tell(ctx, d, e)
}

// end hands a message that cannot run to the broker's dead-letter path.
func (c *Core[M]) end(ctx context.Context, d Delivery[M], e Event[M]) Event[M] {
	c.c.Logger.LogAttrs(ctx, slog.LevelError, c.c.Broker+": message dead", c.attrs(d, e)...)
	e.SettleErr = d.End(ctx, e.Err)
	return c.tell(ctx, d, e)
}

// tell logs a settling that failed and reports e to the hooks.
func (c *Core[M]) tell(ctx context.Context, d Delivery[M], e Event[M]) Event[M] {
	if e.SettleErr != nil {
		c.c.Logger.LogAttrs(ctx, slog.LevelWarn, c.c.Broker+": settling the message failed; the broker hands it over again",
			append(d.LogAttrs(), slog.String("key", e.Key), slog.String("outcome", e.Kind.String()), slog.String("error", e.SettleErr.Error()))...)
	}
	for _, h := range c.c.Hooks {
		h.OnEvent(ctx, e)
	}
	return e
}

// attrs are what a log record of a failed or dead attempt says: the
// message, its key, its attempt, the error, and the stack of a handler
// that panicked.
func (c *Core[M]) attrs(d Delivery[M], e Event[M]) []slog.Attr {
	attrs := append(d.LogAttrs(), slog.String("key", e.Key), slog.Int("attempt", e.Attempt), slog.String("error", e.Err.Error()))
	var p *PanicError
	if errors.As(e.Err, &p) {
		attrs = append(attrs, slog.String("stack", string(p.Stack)))
	}
	return attrs
}

// renew calls d.Renew every RenewEvery until the returned function is
// called, which returns once no Renew runs: a renewal after the outcome
// would undo it (an SQS visibility set after its backoff).
func (c *Core[M]) renew(ctx context.Context, d Delivery[M]) (stop func()) {
	if c.c.RenewEvery == 0 {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(c.c.RenewEvery)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				d.Renew(ctx)
			case <-done:
				return
			case <-ctx.Done():
				return
			}
		}
	})
	return func() { close(done); wg.Wait() }
}

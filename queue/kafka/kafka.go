// Package kafka runs Kafka records exactly once per business key: a
// [Consumer] polls a consumer group through a franz-go client and runs
// each record through an idempotency.Runner under the record's key. A
// duplicate (a record redelivered after a consumer died before its
// commit, the same event produced twice) gets the stored result and is
// committed without running the handler; a failure releases the key and
// is tried again after a delay from a queue.Backoff; a record past
// MaxAttempts, one without a key, and one whose handler returned
// queue.Permanent go to a dead-letter topic.
//
//	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumerGroup("fulfilment"),
//		kgo.ConsumeTopics("orders"), kgo.DisableAutoCommit(), kgo.BlockRebalanceOnPoll())
//	c, err := kafka.NewConsumer(cl, kafka.Options{Runner: runner}, ship)
//	err = c.Run(ctx)
//
// Exactly once. Kafka's idempotent producer (on by default in franz-go)
// drops the duplicates a producer's own retries would write, but not an
// event produced twice by the application (an outbox relay that died
// after the produce and before recording it), nor a record read twice by
// a consumer that died before committing it: the Runner's store, shared
// by the consumers, makes the second run a replay for as long as its
// Retention. An offset is committed only after the outcome of its record
// (and of every record before it in the partition) is stored: a result,
// or the record in the dead-letter topic.
//
// Order and retries. A partition's records run one at a time, in order;
// the partitions of a poll run at once. A failed record is tried again in
// place, after its backoff: its partition waits for at most MaxAttempts-1
// backoffs, then the record goes to the dead-letter topic and the
// partition moves on (the rules are package queue's, the same for every
// consumer). The other partitions' records of the same poll run
// meanwhile (20 in 8 ms while a record waited two backoffs of 100 ms, in
// TestAFailingRecordHoldsBackItsPartitionOnly), but the next poll waits for
// the whole poll to be committed: a record that keeps failing delays every
// partition's next records by up to its backoffs. Keep MaxAttempts and
// Backoff.Max small, and return queue.Permanent for what cannot succeed. A run of the same key elsewhere (a
// consumer that died holding its claim) is waited for and does not count
// as an attempt: the claim lapses after the Runner's LockTimeout. A
// handler that panics has failed its attempt (a queue.PanicError, logged
// with its stack). The attempts are counted in the process: a record that
// kills its consumer (runs it out of memory, say) is tried again by the
// next one, as often as consumers die on it.
//
// Rebalances. The client must block rebalances while a poll's records run
// (kgo.BlockRebalanceOnPoll): a rebalance then waits until they are
// committed, so a partition never moves while one of its records runs
// here. It waits at most the group's rebalance timeout
// (kgo.RebalanceTimeout, 60 s by default), after which the broker drops
// this member from the group: its commit then fails, and the partition's
// new owner reads the uncommitted records again, where a record still
// running here waits on its key's claim and one finished here is a
// duplicate. Keep a poll's worst case (MaxPollRecords records of a
// partition, each up to MaxAttempts-1 backoffs) under that timeout, or
// accept that a slow poll ends in a replay rather than a double effect.
//
// What kfake (the broker the tests run) cannot show: replication, leader
// failover and an unclean leader election, which can lose committed
// records or offsets on a real cluster.
package kafka

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/retryhttp/retryhttp/idempotency"
	"github.com/retryhttp/retryhttp/queue"
)

// KeyHeader is the record header a Consumer takes a record's business key
// from when Options.Key is nil: the Idempotency-Key every outbox message is
// delivered with (its own, or else its ID; kafkaoutbox sends it as a
// header), so a message enqueued without a key is still run once.
const KeyHeader = "Idempotency-Key"

// Defaults of the zero Options fields.
const (
	DefaultMaxPollRecords = 100
	DeadLetterSuffix      = ".dlq"
)

// Headers a dead-lettered record carries, beside the original's own.
const (
	HeaderDeadTopic     = "Dead-Topic"     // the topic it was read from
	HeaderDeadPartition = "Dead-Partition" // its partition
	HeaderDeadOffset    = "Dead-Offset"    // its offset
	HeaderDeadError     = "Dead-Error"     // why it was dead-lettered
)

// Options configure a Consumer. Runner, Key, MaxAttempts, Backoff, Logger
// and Hooks are every consumer's, with the same zero values
// (queue.Config).
type Options struct {
	// Runner runs each record once per key. Required; its Store is where
	// the keys are kept (a shared store, for consumers in many
	// processes).
	Runner *idempotency.Runner
	// Key returns a record's business key (a field of its value, say).
	// nil means the KeyHeader header. A record for which it returns an
	// error goes to the dead-letter topic without running the handler: it
	// cannot be deduplicated.
	Key func(*kgo.Record) (string, error)
	// MaxAttempts is how many times a record runs in this process before
	// it goes to the dead-letter topic. A run of its key elsewhere is
	// waited for and not counted. 0 means queue.DefaultMaxAttempts.
	MaxAttempts int
	// Backoff gives the wait before a failed record runs again; the zero
	// Backoff waits up to 1 s, then 2 s, ... up to 1 min, with full
	// jitter.
	Backoff queue.Backoff
	// DeadLetterTopic is where records that cannot run go. "" means the
	// record's topic with DeadLetterSuffix.
	DeadLetterTopic string
	// MaxPollRecords bounds the records of one poll (see the package doc
	// on rebalances). 0 means DefaultMaxPollRecords.
	MaxPollRecords int
	// Logger gets failures and dead letters; nil means slog.Default().
	Logger *slog.Logger
	// Hooks are told each attempt's outcome.
	Hooks []Hook
}

// Handler is what a Consumer runs for a record: its result is stored
// under the record's key and handed to the key's duplicates.
type Handler func(ctx context.Context, r *kgo.Record) ([]byte, error)

// Event is what a Hook is told of one attempt at a record; Message is the
// record.
type Event = queue.Event[*kgo.Record]

// Hook observes a Consumer: an event for each attempt's outcome. OnEvent
// runs on the partition's goroutine and must not block.
type Hook = queue.Hook[*kgo.Record]

// HookFunc is a function that is a Hook.
type HookFunc = queue.HookFunc[*kgo.Record]

// Metrics counts a Consumer's attempts into package queue's series, with
// broker="kafka". It is a Hook: put it in Options.Hooks.
type Metrics = queue.Metrics[*kgo.Record]

// NewMetrics registers the counters on reg for the consumer named
// consumer (its group, say); several consumers on one registry share
// them, labelled by consumer.
func NewMetrics(reg prometheus.Registerer, consumer string) (*Metrics, error) {
	return queue.NewMetrics[*kgo.Record](reg, "kafka", consumer)
}

// Consumer runs the records of a consumer group once per key. Run it once.
type Consumer struct {
	cl   *kgo.Client
	o    Options
	core *queue.Core[*kgo.Record]
}

// NewConsumer returns a Consumer of cl's group. cl must consume as a
// group (kgo.ConsumerGroup) with kgo.DisableAutoCommit and
// kgo.BlockRebalanceOnPoll: the Consumer commits what it has stored, and
// no rebalance moves a partition while its records run.
func NewConsumer(cl *kgo.Client, o Options, h Handler) (*Consumer, error) {
	switch {
	case cl == nil:
		return nil, errors.New("kafka: nil client")
	case o.MaxPollRecords < 0:
		return nil, fmt.Errorf("kafka: MaxPollRecords %d is negative", o.MaxPollRecords)
	}
	if o.Key == nil {
		o.Key = headerKey
	}
	core, err := queue.NewCore(queue.Config[*kgo.Record]{Broker: "kafka", Runner: o.Runner, Key: o.Key, MaxAttempts: o.MaxAttempts,
		Backoff: o.Backoff, Logger: o.Logger, Hooks: o.Hooks, Handler: h})
	if err != nil {
		return nil, err
	}
	if g, _ := cl.OptValue(kgo.ConsumerGroup).(string); g == "" {
		return nil, errors.New("kafka: the client consumes no group (kgo.ConsumerGroup)")
	}
	if off, _ := cl.OptValue(kgo.DisableAutoCommit).(bool); !off {
		return nil, errors.New("kafka: the client commits on its own (add kgo.DisableAutoCommit): an offset must be committed only once its record's outcome is stored")
	}
	if block, _ := cl.OptValue(kgo.BlockRebalanceOnPoll).(bool); !block {
		return nil, errors.New("kafka: the client lets a rebalance move a partition while its records run (add kgo.BlockRebalanceOnPoll)")
	}
	if o.MaxPollRecords == 0 {
		o.MaxPollRecords = DefaultMaxPollRecords
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return &Consumer{cl: cl, o: o, core: core}, nil
}
func headerKey(r *kgo.Record) (string, error) {
	for _, h := range r.Headers {
		if h.Key == KeyHeader && len(h.Value) > 0 {
			return string(h.Value), nil
		}
	}
	return "", fmt.Errorf("the record has no %s header", KeyHeader)
}

// Run polls and runs records until ctx ends or the client is closed, and
// returns nil then. A commit that fails (the group moved on without this
// member) is logged and polling goes on: the records are read again by
// whoever owns their partition now.
func (c *Consumer) Run(ctx context.Context) error {
	for {
		fetches := c.cl.PollRecords(ctx, c.o.MaxPollRecords)
		if fetches.IsClientClosed() || ctx.Err() != nil {
			c.cl.AllowRebalance()
			return nil
		}
		fetches.EachError(func(topic string, partition int32, err error) {
			c.o.Logger.LogAttrs(ctx, slog.LevelWarn, "kafka: fetch failed", slog.String("topic", topic),
				slog.Int("partition", int(partition)), slog.String("error", err.Error()))
		})
		var (
			wg   sync.WaitGroup
			mu   sync.Mutex
			done []*kgo.Record
		)
		fetches.EachPartition(func(p kgo.FetchTopicPartition) {
			if len(p.Records) == 0 {
				return
			}
			wg.Go(func() {
				last := c.partition(ctx, p.Records)
				if last != nil {
					mu.Lock()
					done = append(done, last)
					mu.Unlock()
				}
			})
		})
		wg.Wait()
		if len(done) > 0 {
			// Not ctx: what has run is committed even when the caller is
			// stopping, so that the next owner does not read it again.
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			if err := c.cl.CommitRecords(cctx, done...); err != nil {
				c.o.Logger.LogAttrs(ctx, slog.LevelWarn, "kafka: commit failed; the records will be read again", slog.String("error", err.Error()))
			}
			cancel()
		}
		c.cl.AllowRebalance()
	}
}

// partition runs a partition's records in order and returns the last
// whose outcome is stored (nil if none): the one to commit.
func (c *Consumer) partition(ctx context.Context, rs []*kgo.Record) *kgo.Record {
	var last *kgo.Record
	for _, r := range rs {
		if !c.record(ctx, r) {
			break
		}
		last = r
	}
	return last
}

// record runs r until its outcome is stored, and reports whether it was:
// false only when ctx ended first. A failed record runs again in place,
// after its backoff.
func (c *Consumer) record(ctx context.Context, r *kgo.Record) bool {
	d := &delivery{c: c, r: r, attempt: 1}
	for {
		e := c.core.Process(ctx, d)
		switch {
		case ctx.Err() != nil && e.Kind == queue.EventFailed:
			return false
		case e.Kind != queue.EventFailed:
			return e.SettleErr == nil // a dead letter is stored once the broker has it
		case !errors.Is(e.Err, idempotency.ErrInFlight): // a run elsewhere is waited for, not counted
			d.attempt++
		}
	}
}

// delivery is a record as package queue settles it: its attempts are
// counted in place, a retry waits in the partition's goroutine, and a
// record that cannot run is produced to the dead-letter topic.
type delivery struct {
	c       *Consumer
	r       *kgo.Record
	attempt int
}

func (d *delivery) Message() *kgo.Record      { return d.r }
func (d *delivery) Attempt() (int, bool)      { return d.attempt, true }
func (d *delivery) Ack(context.Context) error { return nil } // committed with its poll
func (d *delivery) Renew(context.Context)     {}

// Retry waits: the record runs again in place (Consumer.record), unless
// ctx ends first.
func (d *delivery) Retry(ctx context.Context, wait time.Duration) error {
	queue.Sleep(ctx, wait)
	return nil
}

func (d *delivery) LogAttrs() []slog.Attr {
	return []slog.Attr{slog.String("topic", d.r.Topic), slog.Int("partition", int(d.r.Partition)), slog.Int64("offset", d.r.Offset)}
}

// End produces the record to the dead-letter topic, trying again after a
// backoff until the broker has it or ctx ends.
func (d *delivery) End(ctx context.Context, cause error) error {
	c, r := d.c, d.r
	topic := c.o.DeadLetterTopic
	if topic == "" {
		topic = r.Topic + DeadLetterSuffix
	}
	dead := &kgo.Record{Topic: topic, Key: r.Key, Value: r.Value, Headers: append(append([]kgo.RecordHeader(nil), r.Headers...),
		kgo.RecordHeader{Key: HeaderDeadTopic, Value: []byte(r.Topic)},
		kgo.RecordHeader{Key: HeaderDeadPartition, Value: []byte(strconv.Itoa(int(r.Partition)))},
		kgo.RecordHeader{Key: HeaderDeadOffset, Value: []byte(strconv.FormatInt(r.Offset, 10))},
		kgo.RecordHeader{Key: HeaderDeadError, Value: []byte(cause.Error())})}
	for n := 1; ; n++ {
		err := c.cl.ProduceSync(ctx, dead).FirstErr()
		if err == nil {
			return nil
		}
		c.o.Logger.LogAttrs(ctx, slog.LevelWarn, "kafka: producing a dead letter failed", slog.String("to", topic), slog.String("error", err.Error()))
		if !queue.Sleep(ctx, c.o.Backoff.Wait(n, rand.Float64())) {
			return fmt.Errorf("kafka: the dead letter was not produced before the consumer stopped: %w", err)
		}
	}
}

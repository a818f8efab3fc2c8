// Package sqs runs Amazon SQS messages exactly once per business key: a
// [Consumer] receives from a queue through aws-sdk-go-v2 and runs each
// message through an idempotency.Runner under its key. A duplicate (a
// standard queue's second delivery of one message, a message sent twice
// by its producer, a message a killed consumer held) gets the stored
// result and is deleted without running the handler; a failure releases
// the key and is made visible again after a delay from a queue.Backoff;
// a message past MaxAttempts is moved to the dead-letter queue of the
// queue's redrive policy, or, on a queue without one, deleted and
// reported. The rules are package queue's, the same for every consumer.
//
//	c, err := sqs.NewConsumer(client, sqs.Options{Runner: runner, QueueURL: url}, ship)
//	err = c.Run(ctx)
//
// Exactly once. A standard queue delivers a message at least once, and
// sometimes twice; a FIFO queue drops a second send of one deduplication
// ID within five minutes, not one event sent under two IDs, and
// redelivers a message whose consumer died before deleting it. The
// Runner's store, shared by the consumers, makes each of those a replay
// for as long as its Retention. A message is deleted only once its
// outcome is stored.
//
// Timing. Up to Concurrency messages run at once, received by one loop
// with long polling (WaitTime). While a handler runs, the message's
// visibility is extended every VisibilityTimeout/3, so a long handler
// keeps it; a consumer that dies stops extending it, and the message is
// received again within VisibilityTimeout, where it meets its key's
// claim (the Runner's LockTimeout) and waits, failed with
// idempotency.ErrInFlight, until the claim lapses or the first run's
// result is stored. The backoff of a failed message is its visibility
// timeout (whole seconds, up to 12 hours): nothing waits in the
// consumer. On a FIFO queue a failed message holds back the messages of
// its group until it is visible again: that is SQS's order, kept.
//
// The receive count is SQS's ApproximateReceiveCount: every receive
// counts, including those of a key running elsewhere and those after a
// consumer died, so with a redrive policy a message that outlives its
// maxReceiveCount that way is moved to the dead-letter queue by SQS
// itself. Size maxReceiveCount above MaxAttempts with room for that. A
// receive past MaxAttempts (its consumers died on it) runs as any other:
// SQS's redrive is what bounds those; a receive that meets its key
// running elsewhere is never what ends the message.
//
// Dead letters. A message that cannot run (no key, queue.Permanent, a
// failure at MaxAttempts) is sent to the redrive policy's dead-letter
// queue by the Consumer, at once, with its body and attributes and the
// DeadErrorAttribute and DeadReceivesAttribute attributes (as room
// allows: SQS carries ten), and then deleted; a consumer that dies
// between the two leaves a copy in both, and the next one sends it
// again. On a FIFO queue the copy keeps its group and has the message's
// ID as its deduplication ID.
package sqs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/retryhttp/retryhttp/idempotency"
	"github.com/retryhttp/retryhttp/queue"
)

// KeyAttribute is the message attribute a Consumer takes a message's
// business key from when Options.Key is nil: the Idempotency-Key every
// outbox message is delivered with (its own, or else its ID; sqsoutbox
// sends it as an attribute), so a message enqueued without a key is still
// run once.
const KeyAttribute = "Idempotency-Key"

// Attributes a dead letter carries, beside the message's own.
const (
	DeadErrorAttribute    = "Dead-Error"    // why it could not run
	DeadReceivesAttribute = "Dead-Receives" // its receive count
)

// Defaults of the zero Options fields.
const (
	DefaultConcurrency       = 10
	DefaultVisibilityTimeout = 30 * time.Second
	DefaultWaitTime          = 20 * time.Second
)

// Options configure a Consumer. Runner, Key, MaxAttempts, Backoff, Logger
// and Hooks are every consumer's, with the same zero values
// (queue.Config).
type Options struct {
	// Runner runs each message once per key. Required; its Store is where
	// the keys are kept (a shared store, for consumers in many
	// processes), and its Retention must exceed the longest redelivery.
	Runner *idempotency.Runner
	// QueueURL is the queue to receive from. Required.
	QueueURL string
	// Key returns a message's business key (a field of its body, say).
	// nil means the KeyAttribute message attribute. A message for which
	// it returns an error cannot be deduplicated: the handler does not
	// run, and it is ended as a message past MaxAttempts is.
	Key func(types.Message) (string, error)
	// MaxAttempts is the receive count at which a failed message ends:
	// moved to the dead-letter queue of the queue's redrive policy if it
	// has one, deleted and reported otherwise. 0 means
	// queue.DefaultMaxAttempts.
	MaxAttempts int
	// Backoff gives the visibility timeout of a failed message, by its
	// receive count; the zero Backoff waits up to 1 s, then 2 s, ... up
	// to 1 min, with full jitter. SQS takes whole seconds: a wait is
	// rounded to the nearest (below half a second, the message is visible
	// again at once).
	Backoff queue.Backoff
	// Concurrency bounds the messages running at once. 0 means
	// DefaultConcurrency.
	Concurrency int
	// VisibilityTimeout is asked for each received message and renewed
	// every third of it while its handler runs: how soon a message a dead
	// consumer held is received again. Whole seconds, at least 1 s. 0
	// means DefaultVisibilityTimeout.
	VisibilityTimeout time.Duration
	// WaitTime is the long poll of each receive, up to 20 s. 0 means
	// DefaultWaitTime.
	WaitTime time.Duration
	// Logger gets failures and ended messages; nil means slog.Default().
	Logger *slog.Logger
	// Hooks are told each receive's outcome.
	Hooks []Hook
}

// Handler is what a Consumer runs for a message: its result is stored
// under the message's key and handed to the key's duplicates.
type Handler func(ctx context.Context, m types.Message) ([]byte, error)

// Event is what a Hook is told of one receive of a message; Message is
// the message, and Attempt its receive count (ApproximateReceiveCount).
type Event = queue.Event[types.Message]

// Hook observes a Consumer: an event for each receive's outcome. OnEvent
// runs on the message's goroutine and must not block.
type Hook = queue.Hook[types.Message]

// HookFunc is a function that is a Hook.
type HookFunc = queue.HookFunc[types.Message]

// Metrics counts a Consumer's receives into package queue's series, with
// broker="sqs". It is a Hook: put it in Options.Hooks.
type Metrics = queue.Metrics[types.Message]

// NewMetrics registers the counters on reg for the consumer named
// consumer (its queue's name, say); several consumers on one registry
// share them, labelled by consumer.
func NewMetrics(reg prometheus.Registerer, consumer string) (*Metrics, error) {
	return queue.NewMetrics[types.Message](reg, "sqs", consumer)
}

// Consumer runs the messages of one queue once per key. Run it once.
type Consumer struct {
	cl   *awssqs.Client
	o    Options
	core *queue.Core[types.Message]
	dlq  string // the redrive policy's dead-letter queue, read at Run; "" if none
}

// NewConsumer returns a Consumer of o.QueueURL through cl.
func NewConsumer(cl *awssqs.Client, o Options, h Handler) (*Consumer, error) {
	switch {
	case cl == nil:
		return nil, errors.New("sqs: nil client")
	case o.QueueURL == "":
		return nil, errors.New("sqs: no QueueURL")
	case o.Concurrency < 0:
		return nil, fmt.Errorf("sqs: Concurrency %d is negative", o.Concurrency)
	case o.VisibilityTimeout < 0 || o.VisibilityTimeout%time.Second != 0 || o.VisibilityTimeout > 12*time.Hour:
		return nil, fmt.Errorf("sqs: VisibilityTimeout %v is not a whole number of seconds from 1 s to 12 h", o.VisibilityTimeout)
	case o.WaitTime < 0 || o.WaitTime%time.Second != 0 || o.WaitTime > 20*time.Second:
		return nil, fmt.Errorf("sqs: WaitTime %v is not a whole number of seconds up to 20 s", o.WaitTime)
	}
	if o.Key == nil {
		o.Key = attributeKey
	}
	if o.Concurrency == 0 {
		o.Concurrency = DefaultConcurrency
	}
	if o.VisibilityTimeout == 0 {
		o.VisibilityTimeout = DefaultVisibilityTimeout
	}
	if o.WaitTime == 0 {
		o.WaitTime = DefaultWaitTime
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	core, err := queue.NewCore(queue.Config[types.Message]{Broker: "sqs", Runner: o.Runner, Key: o.Key, MaxAttempts: o.MaxAttempts,
		Backoff: o.Backoff, RunPast: true, RenewEvery: o.VisibilityTimeout / 3, Logger: o.Logger, Hooks: o.Hooks, Handler: h})
	if err != nil {
		return nil, err
	}
	return &Consumer{cl: cl, o: o, core: core}, nil
}
func attributeKey(m types.Message) (string, error) {
	if v, ok := m.MessageAttributes[KeyAttribute]; ok && v.StringValue != nil && *v.StringValue != "" {
		return *v.StringValue, nil
	}
	return "", fmt.Errorf("the message has no %s attribute", KeyAttribute)
}

// Run receives and runs messages until ctx ends, then waits for the
// messages running and returns nil. A queue whose attributes cannot be
// read (it does not exist, the credentials are refused) is an error.
func (c *Consumer) Run(ctx context.Context) error {
	attrs, err := c.cl.GetQueueAttributes(ctx, &awssqs.GetQueueAttributesInput{QueueUrl: aws.String(c.o.QueueURL),
		AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameRedrivePolicy}})
	if err != nil {
		return fmt.Errorf("sqs: the queue's attributes: %w", err)
	}
	if policy := attrs.Attributes[string(types.QueueAttributeNameRedrivePolicy)]; policy != "" {
		if c.dlq, err = c.deadLetterQueue(ctx, policy); err != nil {
			return err
		}
	}
	slots := make(chan struct{}, c.o.Concurrency)
	var wg sync.WaitGroup
	defer wg.Wait()
	for ctx.Err() == nil {
		// Receive only what can run now: a message received and left
		// waiting would burn its visibility timeout.
		slots <- struct{}{}
		n := 1
		for n < min(c.o.Concurrency, 10) && len(slots) < cap(slots) {
			slots <- struct{}{}
			n++
		}
		out, err := c.cl.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{QueueUrl: aws.String(c.o.QueueURL),
			MaxNumberOfMessages: int32(n), WaitTimeSeconds: int32(c.o.WaitTime / time.Second),
			VisibilityTimeout:     int32(c.o.VisibilityTimeout / time.Second),
			MessageAttributeNames: []string{"All"},
			MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameApproximateReceiveCount,
				types.MessageSystemAttributeNameMessageGroupId}})
		var got []types.Message
		if err == nil {
			got = out.Messages
		} else if ctx.Err() == nil {
			c.o.Logger.LogAttrs(ctx, slog.LevelWarn, "sqs: receive failed", slog.String("queue", c.o.QueueURL), slog.String("error", err.Error()))
			queue.Sleep(ctx, time.Second)
		}
		for range n - len(got) {
			<-slots
		}
		for _, m := range got {
			wg.Go(func() {
				defer func() { <-slots }()
				c.core.Process(ctx, delivery{c, m})
			})
		}
	}
	return nil
}

// deadLetterQueue is the URL of the dead-letter queue a redrive policy
// names by its ARN (arn:aws:sqs:region:account:name).
func (c *Consumer) deadLetterQueue(ctx context.Context, policy string) (string, error) {
	var p struct {
		Target string `json:"deadLetterTargetArn"`
	}
	if err := json.Unmarshal([]byte(policy), &p); err != nil || p.Target == "" {
		return "", fmt.Errorf("sqs: the queue's redrive policy %q names no dead-letter queue", policy)
	}
	name := p.Target[strings.LastIndexByte(p.Target, ':')+1:]
	out, err := c.cl.GetQueueUrl(ctx, &awssqs.GetQueueUrlInput{QueueName: aws.String(name)})
	if err != nil {
		return "", fmt.Errorf("sqs: the dead-letter queue %s: %w", p.Target, err)
	}
	return aws.ToString(out.QueueUrl), nil
}

// delivery is a received message as package queue settles it: deleted,
// made visible again after its backoff, or sent to the dead-letter queue.
type delivery struct {
	c *Consumer
	m types.Message
}

func (d delivery) Message() types.Message { return d.m }

// Attempt is the receive count, ApproximateReceiveCount, which SQS keeps
// across consumers.
func (d delivery) Attempt() (int, bool) {
	n, err := strconv.Atoi(d.m.Attributes[string(types.MessageSystemAttributeNameApproximateReceiveCount)])
	if err != nil || n < 1 {
		return 1, false
	}
	return n, true
}

func (d delivery) LogAttrs() []slog.Attr {
	return []slog.Attr{slog.String("message_id", aws.ToString(d.m.MessageId))}
}

// Ack deletes the message.
func (d delivery) Ack(ctx context.Context) error {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
	defer cancel()
	_, err := d.c.cl.DeleteMessage(sctx, &awssqs.DeleteMessageInput{QueueUrl: aws.String(d.c.o.QueueURL), ReceiptHandle: d.m.ReceiptHandle})
	return err
}

// Retry makes the message visible again after wait, rounded to whole
// seconds: nothing waits in the consumer.
func (d delivery) Retry(ctx context.Context, wait time.Duration) error {
	return d.visible(ctx, int32(min((wait+time.Second/2)/time.Second, 12*60*60)))
}

// Renew extends the message's visibility while its handler runs.
func (d delivery) Renew(ctx context.Context) {
	if err := d.visible(ctx, int32(d.c.o.VisibilityTimeout/time.Second)); err != nil {
		d.c.o.Logger.LogAttrs(ctx, slog.LevelWarn, "sqs: extending the visibility failed", slog.String("message_id", aws.ToString(d.m.MessageId)),
			slog.String("error", err.Error()))
	}
}

func (d delivery) visible(ctx context.Context, secs int32) error {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
	defer cancel()
	_, err := d.c.cl.ChangeMessageVisibility(sctx, &awssqs.ChangeMessageVisibilityInput{QueueUrl: aws.String(d.c.o.QueueURL),
		ReceiptHandle: d.m.ReceiptHandle, VisibilityTimeout: secs})
	return err
}

// End sends the message to the dead-letter queue, then deletes it;
// without one, deletes it and logs its body.
func (d delivery) End(ctx context.Context, cause error) error {
	c, m := d.c, d.m
	if c.dlq == "" {
		body, _ := json.Marshal(aws.ToString(m.Body))
		c.o.Logger.LogAttrs(ctx, slog.LevelError, "sqs: message deleted: the queue has no redrive policy",
			slog.String("message_id", aws.ToString(m.MessageId)), slog.String("body", string(body)))
		return d.Ack(ctx)
	}
	n, _ := d.Attempt()
	attrs := maps.Clone(m.MessageAttributes)
	if attrs == nil {
		attrs = map[string]types.MessageAttributeValue{}
	}
	for k, v := range map[string]string{DeadErrorAttribute: cause.Error(), DeadReceivesAttribute: strconv.Itoa(n)} {
		if len(attrs) < maxAttributes {
			attrs[k] = types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(v)}
		}
	}
	in := &awssqs.SendMessageInput{QueueUrl: aws.String(c.dlq), MessageBody: m.Body, MessageAttributes: attrs}
	if g := m.Attributes[string(types.MessageSystemAttributeNameMessageGroupId)]; g != "" {
		in.MessageGroupId, in.MessageDeduplicationId = aws.String(g), m.MessageId
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
	_, err := c.cl.SendMessage(sctx, in)
	cancel()
	if err != nil {
		// Not deleted: received again after its visibility timeout, and
		// sent again then.
		return fmt.Errorf("sending it to the dead-letter queue: %w", err)
	}
	return d.Ack(ctx)
}

// maxAttributes is how many message attributes SQS carries.
const maxAttributes = 10

// settleTimeout bounds a delete or a visibility change, made with a
// context that outlives the caller's: what has run is settled even when
// the consumer is stopping.
const settleTimeout = 10 * time.Second

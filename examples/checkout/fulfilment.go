package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/retryhttp/retryhttp"
	"github.com/retryhttp/retryhttp/idempotency"
	"github.com/retryhttp/retryhttp/idempotency/redisstore"
	"github.com/retryhttp/retryhttp/queue"
	"github.com/retryhttp/retryhttp/queue/kafka"
	"github.com/retryhttp/retryhttp/queue/natsjs"
)

// The third layer: "order placed" events on NATS JetStream or Kafka,
// and a fulfilment consumer, a process of its own, that calls the
// shipping provider for each. The consumer is killed with SIGKILL while
// it works and started again, so events it was handling come back:
// redelivered by JetStream once their ack wait passes, read again by the
// next member of the Kafka group from the last committed offset.

// consumerRole, set in a child's environment, makes this program (or
// the test binary) the fulfilment consumer, with its arguments.
const consumerRole = "CHECKOUT_FULFILMENT"

// fulfilment is what a consumer process needs to know.
type fulfilment struct {
	Events        []string // the broker's flags (events.args)
	Redis, Prefix string   // the Runner's store, shared by every consumer process
	Shipping      string   // the provider's URL
	Pieces        bool
}

func (f fulfilment) args() []string {
	return append(append([]string(nil), f.Events...), "-redis", f.Redis, "-prefix", f.Prefix,
		"-shipping", f.Shipping, fmt.Sprintf("-pieces=%v", f.Pieces))
}

// consume is the consumer process: it handles events until it is
// killed.
func consume(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("fulfilment", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var f fulfilment
	natsURL := fs.String("nats", "", "NATS URL")
	streamName := fs.String("stream", "", "stream")
	durable := fs.String("durable", "", "durable consumer")
	kafkaAddr := fs.String("kafka", "", "Kafka broker")
	topic := fs.String("topic", "", "topic")
	fs.StringVar(&f.Redis, "redis", "", "Redis address")
	fs.StringVar(&f.Prefix, "prefix", "", "Redis key prefix")
	fs.StringVar(&f.Shipping, "shipping", "", "shipping provider URL")
	fs.BoolVar(&f.Pieces, "pieces", false, "run each event once per order")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	fail := func(err error) int { fmt.Fprintln(stderr, "fulfilment:", err); return 1 }
	toShipping := &http.Client{Transport: &retryhttp.Transport{InjectIdempotencyKey: true, Budget: retryhttp.NoBudget, Logger: quiet,
		Policy: retryhttp.Policy{MaxAttempts: 4, BaseDelay: 10 * time.Millisecond, MaxDelay: 100 * time.Millisecond}}}
	ship := func(ctx context.Context, body []byte) error {
		req, _ := http.NewRequestWithContext(ctx, "POST", f.Shipping+"/v1/shipments", strings.NewReader(string(body)))
		req.Header.Set("Content-Type", "application/json")
		resp, err := toShipping.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode >= 300 {
			return fmt.Errorf("shipping answered %d", resp.StatusCode)
		}
		return nil
	}
	var runner *idempotency.Runner
	backoff := queue.Backoff{Base: 50 * time.Millisecond, Max: 500 * time.Millisecond}
	if f.Pieces {
		rdb := redis.NewClient(&redis.Options{Addr: f.Redis})
		// The demo's keys live only as long as the demo: its Redis need not
		// persist them, so the store's warning about that is not shown.
		store, err := redisstore.New(rdb, redisstore.Options{Prefix: f.Prefix, Logger: quiet})
		if err != nil {
			return fail(err)
		}
		if runner, err = idempotency.NewRunner(idempotency.RunnerOptions{Store: store, Kind: "fulfilment", LockTimeout: 2 * time.Second, Logger: quiet}); err != nil {
			return fail(err)
		}
	}
	ctx := context.Background()
	if *kafkaAddr != "" {
		return fail(consumeKafka(ctx, *kafkaAddr, *topic, runner, backoff, ship))
	}
	nc, err := nats.Connect(*natsURL)
	if err != nil {
		return fail(err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return fail(err)
	}
	cons, err := js.Consumer(ctx, *streamName, *durable)
	if err != nil {
		return fail(err)
	}
	var handler jetstream.MessageHandler
	if runner != nil {
		handler, err = natsjs.Handler(natsjs.Options{Runner: runner, Logger: quiet, Backoff: backoff,
			// JetStream counts every delivery, those of a killed consumer's
			// held messages too: the incident kills consumers about 90
			// times, so a message may be delivered far more than 5 times
			// (the default) without ever failing.
			MaxAttempts: 100,
			Key:         func(m jetstream.Msg) (string, error) { return orderKey(m.Data()) }, // the business key: the order, whichever message carries it
		}, func(ctx context.Context, m jetstream.Msg) ([]byte, error) {
			return nil, ship(ctx, m.Data()) // ctx carries the order: the shipment's key is the same on every delivery
		})
		if err != nil {
			return fail(err)
		}
	} else {
		handler = func(m jetstream.Msg) { // each layer on its own: ship, then ack
			if err := ship(context.Background(), m.Data()); err != nil {
				m.NakWithDelay(50 * time.Millisecond)
				return
			}
			m.Ack()
		}
	}
	if _, err := cons.Consume(handler, jetstream.PullMaxMessages(32)); err != nil {
		return fail(err)
	}
	select {} // until killed
}

// consumeKafka is the consumer process on Kafka, a member of the group
// "fulfilment": with a runner, through queue/kafka; without, shipping
// each record until it ships and committing after each poll.
func consumeKafka(ctx context.Context, addr, topic string, runner *idempotency.Runner, backoff queue.Backoff, ship func(context.Context, []byte) error) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumerGroup("fulfilment"), kgo.ConsumeTopics(topic),
		kgo.DisableAutoCommit(), kgo.BlockRebalanceOnPoll(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.InstanceID("shipper"), // static membership: the next process takes a killed one's place without waiting out its session
		kgo.RetryBackoffFn(func(int) time.Duration { return 20 * time.Millisecond }))
	if err != nil {
		return err
	}
	if runner != nil {
		c, err := kafka.NewConsumer(cl, kafka.Options{Runner: runner, Logger: quiet, Backoff: backoff, MaxPollRecords: 32,
			Key: func(r *kgo.Record) (string, error) { return orderKey(r.Value) }, // the business key: the order, whichever record carries it
		}, func(ctx context.Context, r *kgo.Record) ([]byte, error) {
			return nil, ship(ctx, r.Value) // ctx carries the order: the shipment's key is the same on every read
		})
		if err != nil {
			return err
		}
		return c.Run(ctx)
	}
	for { // each layer on its own: ship, then commit
		fetches := cl.PollRecords(ctx, 32) // as many as the NATS consumer pulls
		fetches.EachRecord(func(r *kgo.Record) {
			for ship(ctx, r.Value) != nil {
				time.Sleep(50 * time.Millisecond)
			}
		})
		if err := cl.CommitUncommittedOffsets(ctx); err != nil {
			return err
		}
		cl.AllowRebalance()
	}
}

// fleet runs consumer processes one after another, killing each with
// SIGKILL after about every (a random fraction of it more), until stop;
// the last runs until stop. It returns how many it killed.
func fleet(stop <-chan struct{}, f fulfilment, every time.Duration, coin *chance, stderr io.Writer) (killed int, err error) {
	self, err := os.Executable()
	if err != nil {
		return 0, err
	}
	for {
		cmd := exec.Command(self, f.args()...)
		cmd.Env = append(os.Environ(), consumerRole+"=1")
		cmd.Stdout, cmd.Stderr = io.Discard, stderr
		if err := cmd.Start(); err != nil {
			return killed, err
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		life := every + time.Duration(coin.float()*float64(every))
		t := time.NewTimer(life)
		select {
		case <-stop:
			t.Stop()
			cmd.Process.Signal(syscall.SIGKILL)
			<-exited
			return killed, nil
		case err := <-exited:
			t.Stop()
			return killed, fmt.Errorf("the fulfilment consumer exited: %v", err)
		case <-t.C:
			cmd.Process.Signal(syscall.SIGKILL) // mid-message, most likely
			<-exited
			killed++
		}
	}
}

// orderKey is an event's business key: its order.
func orderKey(body []byte) (string, error) {
	var e orderBody
	if err := json.Unmarshal(body, &e); err != nil {
		return "", err
	}
	return fmt.Sprint("order-", e.Order), nil
}

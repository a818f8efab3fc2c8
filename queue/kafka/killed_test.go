package kafka_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/retryhttp/retryhttp/idempotency"
	"github.com/retryhttp/retryhttp/idempotency/redisstore"
	"github.com/retryhttp/retryhttp/queue"
	"github.com/retryhttp/retryhttp/queue/kafka"
	"github.com/retryhttp/retryhttp/shared/kafkatest"
	"github.com/retryhttp/retryhttp/shared/shiptest"
	"github.com/retryhttp/retryhttp/shared/testenv"
)

// What the consumer process of TestConsumersKilled is told, beside
// childTopic.
const (
	childBroker   = "KAFKA_TEST_CHILD_BROKER"
	childPrefix   = "KAFKA_TEST_CHILD_PREFIX"
	childShipping = "KAFKA_TEST_CHILD_SHIPPING"
)

// The consumer process of TestConsumersKilled, run by the test binary
// with the child variables set: it consumes the topic as the group's one
// static member, runs each record once per order through a Runner on Redis
// (shared by every consumer process), and ships the order with a key
// derived from it, until it is killed.
func TestChildConsumer(t *testing.T) {
	topic := os.Getenv(childTopic)
	if topic == "" {
		t.Skip("run by TestConsumersKilled")
	}
	store, err := redisstore.New(redis.NewClient(&redis.Options{Addr: testenv.RedisAddr()}), redisstore.Options{Prefix: os.Getenv(childPrefix), Logger: quietLog})
	if err != nil {
		t.Fatal(err)
	}
	runner, err := idempotency.NewRunner(idempotency.RunnerOptions{Store: store, Kind: "shipping", LockTimeout: 2 * time.Second,
		Retention: time.Minute, Logger: quietLog}) // the test's keys leave the shared Redis soon after
	if err != nil {
		t.Fatal(err)
	}
	shipper := shiptest.NewShipper(os.Getenv(childShipping))
	cl, err := kgo.NewClient(kgo.SeedBrokers(os.Getenv(childBroker)), kgo.ConsumerGroup("shipping"), kgo.ConsumeTopics(topic),
		kgo.DisableAutoCommit(), kgo.BlockRebalanceOnPoll(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.InstanceID("shipper"), // static membership: the next process takes the killed one's place without waiting out its session
		kgo.RetryBackoffFn(func(int) time.Duration { return 20 * time.Millisecond }))
	if err != nil {
		t.Fatal(err)
	}
	c, err := kafka.NewConsumer(cl, kafka.Options{Runner: runner, Logger: quietLog, MaxPollRecords: 50,
		Key:     func(r *kgo.Record) (string, error) { return string(r.Value), nil }, // the order, whichever message carries it
		Backoff: queue.Backoff{Base: 5 * time.Millisecond, Max: 20 * time.Millisecond},
	}, func(ctx context.Context, r *kgo.Record) ([]byte, error) {
		return nil, shipper.Ship(ctx, string(r.Value)) // the key derived from the order: the same on every run
	})
	if err != nil {
		t.Fatal(err)
	}
	c.Run(context.Background())
}

// 1,000 orders on a kfake broker of the test's own, 100 of them produced
// twice under two message IDs (a producer that sent again), consumed by
// processes of the test's own that are SIGKILLed every 250 to 400 ms and
// started again, the broker itself SIGKILLed once and restarted on its
// data directory: what a killed consumer ran and did not commit is read
// again by the next one. The consumers share a Runner on Redis and ship
// with keys derived from the order through a Transport to a shipping
// service behind the idempotency middleware: each order ships exactly
// once, and every offset ends committed.
func TestConsumersKilled(t *testing.T) {
	if raceEnabled {
		t.Skip("many processes for seconds: CI runs it without the race detector")
	}
	if os.Getenv(childTopic) != "" {
		t.Skip("in the child")
	}
	if err := redis.NewClient(&redis.Options{Addr: testenv.RedisAddr()}).Ping(context.Background()).Err(); err != nil {
		testenv.Unreachable(t, "Redis", testenv.RedisAddr(), err)
	}
	topic := fmt.Sprintf("orders-%d", time.Now().UnixNano())
	b := kafkatest.Start(t, 4, topic) // named at the start: it survives the broker's SIGKILL
	shipping := shiptest.Start(t, 2*time.Millisecond)
	const orders = 1000
	var records []*kgo.Record
	for i := range orders {
		copies := 1
		if i%10 == 0 {
			copies = 2
		}
		for copy := range copies {
			records = append(records, &kgo.Record{Topic: topic, Key: fmt.Appendf(nil, "order-%d", i), Value: fmt.Appendf(nil, "order-%d", i),
				Headers: []kgo.RecordHeader{{Key: "Message-Id", Value: fmt.Appendf(nil, "msg-%d-%d", i, copy)}}})
		}
	}
	produce(t, b.Addr, topic, records...)
	allCommitted := func() bool {
		var n int64
		for _, at := range committed(t, b.Addr, "shipping", topic) {
			n += at
		}
		return n == int64(len(records))
	}
	prefix := "retryhttp-test-kafka-killed:" + topic + ":"
	kills := shipping.Kills(t, orders, 250*time.Millisecond, func() *exec.Cmd {
		child := exec.Command(os.Args[0], "-test.run=^TestChildConsumer$")
		child.Env = append(os.Environ(), childTopic+"="+topic, childBroker+"="+b.Addr, childPrefix+"="+prefix, childShipping+"="+shipping.URL)
		child.Stdout, child.Stderr = io.Discard, os.Stderr
		return child
	}, func() bool { return shipping.Orders() == orders && allCommitted() }, func(kills int) {
		if kills == 3 { // the broker dies under a consumer, and comes back on its data
			b.Kill()
			b.Start()
			time.Sleep(250 * time.Millisecond)
		}
	})
	if kills == 0 {
		t.Error("no consumer was killed")
	}
	requests := shipping.Check(t, orders)
	t.Logf("%d orders (%d records) shipped once each in %d requests, across %d consumers and the broker once killed with SIGKILL",
		orders, len(records), requests, kills)
}

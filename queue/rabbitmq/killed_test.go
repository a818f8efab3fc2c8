package rabbitmq_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/redis/go-redis/v9"

	"github.com/retryhttp/retryhttp/idempotency"
	"github.com/retryhttp/retryhttp/idempotency/redisstore"
	"github.com/retryhttp/retryhttp/queue"
	"github.com/retryhttp/retryhttp/queue/rabbitmq"
	"github.com/retryhttp/retryhttp/shared/shiptest"
	"github.com/retryhttp/retryhttp/shared/testenv"
)

// The consumer process of TestConsumersKilled, run by the test binary
// with these variables set: it consumes the queue, runs each delivery once
// per order through a Runner on Redis (shared by every consumer process),
// and ships the order with a key derived from it, until it is killed.
const (
	childQueue    = "RABBITMQ_TEST_CHILD_QUEUE"
	childPrefix   = "RABBITMQ_TEST_CHILD_PREFIX"
	childShipping = "RABBITMQ_TEST_CHILD_SHIPPING"
)

func TestChildConsumer(t *testing.T) {
	q := os.Getenv(childQueue)
	if q == "" {
		t.Skip("run by TestConsumersKilled")
	}
	conn := dial(t)
	rdb := redis.NewClient(&redis.Options{Addr: testenv.RedisAddr()})
	store, err := redisstore.New(rdb, redisstore.Options{Prefix: os.Getenv(childPrefix)})
	if err != nil {
		t.Fatal(err)
	}
	runner, err := idempotency.NewRunner(idempotency.RunnerOptions{Store: store, Kind: "shipping", LockTimeout: 2 * time.Second,
		Retention: time.Minute, Logger: quietLog}) // the test's keys leave the shared Redis soon after
	if err != nil {
		t.Fatal(err)
	}
	shipper := shiptest.NewShipper(os.Getenv(childShipping))
	handle, err := rabbitmq.Handler(rabbitmq.Options{Runner: runner, Logger: quietLog,
		Key:     func(d amqp.Delivery) (string, error) { return string(d.Body), nil }, // the order, whichever message carries it
		Backoff: queue.Backoff{Base: 5 * time.Millisecond, Max: 20 * time.Millisecond},
	}, func(ctx context.Context, d amqp.Delivery) ([]byte, error) {
		return nil, shipper.Ship(ctx, string(d.Body)) // the key derived from the order: the same on every run
	})
	if err != nil {
		t.Fatal(err)
	}
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	ch.Qos(50, 0, false)
	ds, err := ch.Consume(q, "", false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	for d := range ds {
		go handle(context.Background(), d)
	}
}

// 1,000 orders on a real RabbitMQ queue, 100 of them published twice
// under two message IDs, consumed by processes of the test's own that are
// killed with SIGKILL 50 to 200 ms into their work and started again: what a killed
// consumer held is redelivered to the next one (RabbitMQ redelivers
// unacknowledged deliveries when their channel dies). The consumers share a
// Runner on Redis, and ship with keys derived from the order through a
// Transport to a shipping service behind the idempotency middleware: each
// order ships exactly once.
func TestConsumersKilled(t *testing.T) {
	if os.Getenv(childQueue) != "" {
		t.Skip("in the child")
	}
	conn := dial(t)
	if err := redis.NewClient(&redis.Options{Addr: testenv.RedisAddr()}).Ping(context.Background()).Err(); err != nil {
		testenv.Unreachable(t, "Redis", testenv.RedisAddr(), err)
	}
	q := testQueue(t, conn)
	shipping := shiptest.Start(t, 10*time.Millisecond) // a shipment takes a moment: a kill lands among the 50 in flight
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	const orders = 1000
	for i := range orders {
		copies := 1
		if i%10 == 0 {
			copies = 2
		}
		for copy := range copies {
			if err := ch.PublishWithContext(context.Background(), "", q, false, false,
				amqp.Publishing{MessageId: fmt.Sprint("msg-", i, "-", copy), Body: []byte(fmt.Sprint("order-", i))}); err != nil {
				t.Fatal(err)
			}
		}
	}
	prefix := "retryhttp-test-killed:" + q + ":"
	finished := func() bool {
		st, err := ch.QueueDeclarePassive(q, false, false, false, false, nil)
		return err == nil && st.Messages == 0 && shipping.Orders() == orders
	}
	kills := shipping.Kills(t, orders, 50*time.Millisecond, func() *exec.Cmd {
		child := exec.Command(os.Args[0], "-test.run=^TestChildConsumer$")
		child.Env = append(os.Environ(), childQueue+"="+q, childPrefix+"="+prefix, childShipping+"="+shipping.URL)
		child.Stdout, child.Stderr = io.Discard, os.Stderr
		return child
	}, finished, nil)
	if kills == 0 {
		t.Error("no consumer was killed")
	}
	requests := shipping.Check(t, orders)
	t.Logf("%d orders shipped once each in %d requests, across %d consumers killed with SIGKILL", orders, requests, kills)
}

var quietLog = slog.New(slog.DiscardHandler)

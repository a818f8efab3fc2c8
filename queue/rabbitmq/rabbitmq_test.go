package rabbitmq_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"go.uber.org/goleak"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/retryhttp/retryhttp/idempotency"
	"github.com/retryhttp/retryhttp/queue"
	"github.com/retryhttp/retryhttp/queue/rabbitmq"
	"github.com/retryhttp/retryhttp/shared/testenv"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// dial reaches RETRYHTTP_TEST_AMQP (default the machine's RabbitMQ,
// guest/guest); without it the test is skipped loudly, and fails under
// CI=true.
func dial(t testing.TB) *amqp.Connection {
	t.Helper()
	conn, err := amqp.DialConfig(testenv.AMQPURL(), amqp.Config{Dial: amqp.DefaultDial(2 * time.Second)})
	if err != nil {
		testenv.Unreachable(t, "RabbitMQ", testenv.AMQPURL(), err)
	}
	closed := conn.NotifyClose(make(chan *amqp.Error, 1))
	t.Cleanup(func() {
		conn.Close()
		if err := <-closed; err != nil {
			t.Logf("the connection closed: %v", err)
		}
	})
	return conn
}

// testQueue declares a queue of the test's own, deleted when it ends.
func testQueue(t testing.TB, conn *amqp.Connection) string {
	t.Helper()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("retryhttp-test-%d", time.Now().UnixNano())
	if _, err := ch.QueueDeclare(name, false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if ch, err := conn.Channel(); err == nil {
			ch.QueueDelete(name, false, false, false)
			ch.Close()
		}
	})
	ch.Close()
	return name
}

// dropAck is an acknowledger that loses the acknowledgement of some
// deliveries, as a consumer killed between its effect and its ack does:
// the broker delivers them again when the channel closes.
type dropAck struct {
	amqp.Acknowledger
	drop func() bool
}

func (a dropAck) Ack(tag uint64, multiple bool) error {
	if a.drop() {
		return nil
	}
	return a.Acknowledger.Ack(tag, multiple)
}

type counter struct {
	mu sync.Mutex
	n  map[queue.EventKind]int
}

func (c *counter) OnEvent(_ context.Context, e rabbitmq.Event) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[queue.EventKind]int{}
	}
	c.n[e.Kind]++
}

func (c *counter) get(k queue.EventKind) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[k]
}

// 1,000 orders through a real RabbitMQ queue, with 100 published a second
// time (a publisher retrying after a lost confirm), one handler run in ten
// failing (requeued after a backoff) and one ack in twenty lost on a
// consumer whose channel then closes, as a killed consumer's does (its
// unacknowledged deliveries go to the next consumer). Each order's effect
// happens exactly once.
func TestExactlyOncePerOrder(t *testing.T) {
	conn := dial(t)
	name := testQueue(t, conn)
	runner, err := idempotency.NewRunner(idempotency.RunnerOptions{Kind: "fulfilment", LockTimeout: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	effects := map[string]int{}
	var runs atomic.Int64
	rng := rand.New(rand.NewPCG(1, 2))
	var rngMu sync.Mutex
	chance := func(p float64) bool { rngMu.Lock(); defer rngMu.Unlock(); return rng.Float64() < p }
	hooks := &counter{}
	reg := prometheus.NewRegistry()
	metrics, err := rabbitmq.NewMetrics(reg, "fulfilment")
	if err != nil {
		t.Fatal(err)
	}
	handle, err := rabbitmq.Handler(rabbitmq.Options{
		Runner:  runner,
		Key:     func(d amqp.Delivery) (string, error) { return string(d.Body), nil }, // the business key
		Backoff: queue.Backoff{Base: 5 * time.Millisecond, Max: 20 * time.Millisecond},
		Hooks:   []rabbitmq.Hook{hooks, metrics},
		Logger:  slog.New(slog.DiscardHandler),
	}, func(ctx context.Context, d amqp.Delivery) ([]byte, error) {
		runs.Add(1)
		if chance(0.1) {
			return nil, errors.New("the shipping provider flickered")
		}
		mu.Lock()
		effects[string(d.Body)]++
		mu.Unlock()
		return []byte("shipped"), nil
	})
	if err != nil {
		t.Fatal(err)
	}

	pub, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	if err := pub.Confirm(false); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	const orders = 1000
	publish := func(order int, id string) {
		t.Helper()
		c, err := pub.PublishWithDeferredConfirmWithContext(ctx, "", name, true, false, amqp.Publishing{MessageId: id, Body: []byte(fmt.Sprint("order-", order))})
		if err != nil {
			t.Fatal(err)
		}
		if ok, err := c.WaitContext(ctx); !ok || err != nil {
			t.Fatalf("publish %s not confirmed: %v", id, err)
		}
	}
	for i := range orders {
		publish(i, fmt.Sprint("msg-", i))
		if i%10 == 0 {
			publish(i, fmt.Sprint("msg-", i, "-again"))
		}
	}

	// consume handles deliveries on a channel of its own until stop; it
	// closes the channel then, which requeues what it did not ack.
	consume := func(stop <-chan struct{}, lose bool) <-chan struct{} {
		ch, err := conn.Channel()
		if err != nil {
			t.Fatal(err)
		}
		ch.Qos(200, 0, false) // room for the deliveries whose ack is lost: they hold their slots until the channel closes
		ds, err := ch.Consume(name, "", false, false, false, false, nil)
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		var wg sync.WaitGroup
		go func() {
			defer close(done)
			for {
				select {
				case <-stop:
					// The handlers finish first: an ack sent on a channel
					// being closed reaches the broker on the next channel
					// given its number, which closes the connection.
					wg.Wait()
					ch.Close()
					return
				case d, ok := <-ds:
					if !ok {
						wg.Wait()
						return
					}
					if lose {
						d.Acknowledger = dropAck{d.Acknowledger, func() bool { return chance(0.05) }}
					}
					wg.Go(func() { handle(ctx, d) })
				}
			}
		}()
		return done
	}
	handled := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(effects)
	}
	// The first consumer loses some acks and stops once most orders ran.
	stop1 := make(chan struct{})
	done1 := consume(stop1, true)
	for deadline := time.Now().Add(30 * time.Second); handled() < orders*9/10; {
		if time.Now().After(deadline) {
			t.Fatalf("the first consumer handled %d orders in 30 s", handled())
		}
		time.Sleep(10 * time.Millisecond)
	}
	close(stop1)
	<-done1
	// The next consumer gets the rest, the lost acks' deliveries among them.
	stop2 := make(chan struct{})
	done2 := consume(stop2, false)
	for deadline := time.Now().Add(30 * time.Second); ; {
		q, err := pub.QueueDeclarePassive(name, false, false, false, false, nil)
		if err != nil {
			t.Fatal(err)
		}
		if handled() == orders && q.Messages == 0 && hooks.get(queue.EventProcessed)+hooks.get(queue.EventDuplicate) >= orders+orders/10 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 30 s: %d orders handled, %d messages ready", handled(), q.Messages)
		}
		time.Sleep(20 * time.Millisecond)
	}
	close(stop2)
	<-done2

	mu.Lock()
	defer mu.Unlock()
	for key, n := range effects {
		if n != 1 {
			t.Errorf("%s: %d effects, want 1", key, n)
		}
	}
	t.Logf("%d orders, %d handler runs, events: processed %d, duplicate %d, failed %d", orders, runs.Load(),
		hooks.get(queue.EventProcessed), hooks.get(queue.EventDuplicate), hooks.get(queue.EventFailed))
	if hooks.get(queue.EventDuplicate) < orders/10 {
		t.Errorf("%d duplicates acknowledged, want at least the %d orders published twice", hooks.get(queue.EventDuplicate), orders/10)
	}
	if hooks.get(queue.EventFailed) == 0 {
		t.Error("no failure was requeued")
	}
	// The metrics count what the hooks were told.
	for _, k := range []queue.EventKind{queue.EventProcessed, queue.EventDuplicate, queue.EventFailed, queue.EventDead} {
		if got := messages(t, reg, k.String()); got != float64(hooks.get(k)) {
			t.Errorf("queue_messages_total{outcome=%q} %v, want the hooks' %d", k, got, hooks.get(k))
		}
	}
}

// messages is queue_messages_total for outcome, of this broker and the
// test's consumer.
func messages(t *testing.T, reg *prometheus.Registry, outcome string) float64 {
	t.Helper()
	v, ok := testenv.Sum(t, reg, "queue_messages_total", map[string]string{"outcome": outcome, "consumer": "fulfilment", "broker": "rabbitmq"})
	if !ok {
		t.Fatalf("no queue_messages_total series for outcome %q", outcome)
	}
	return v
}

// A delivery without a key cannot be deduplicated: it is rejected, and
// the handler never runs.
func TestDeliveryWithoutKeyIsRejected(t *testing.T) {
	conn := dial(t)
	name := testQueue(t, conn)
	runner, err := idempotency.NewRunner(idempotency.RunnerOptions{Kind: "fulfilment"})
	if err != nil {
		t.Fatal(err)
	}
	hooks := &counter{}
	var ran atomic.Bool
	handle, err := rabbitmq.Handler(rabbitmq.Options{Runner: runner, Hooks: []rabbitmq.Hook{hooks}, Logger: slog.New(slog.DiscardHandler)},
		func(context.Context, amqp.Delivery) ([]byte, error) { ran.Store(true); return nil, nil })
	if err != nil {
		t.Fatal(err)
	}
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	if err := ch.PublishWithContext(context.Background(), "", name, false, false, amqp.Publishing{Body: []byte("no id")}); err != nil {
		t.Fatal(err)
	}
	ds, err := ch.Consume(name, "", false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case d := <-ds:
		handle(context.Background(), d)
	case <-time.After(10 * time.Second):
		t.Fatal("no delivery")
	}
	if hooks.get(queue.EventDead) != 1 || ran.Load() {
		t.Fatalf("rejected %d, handler ran %v; want the delivery rejected unrun", hooks.get(queue.EventDead), ran.Load())
	}
	if _, err := rabbitmq.Handler(rabbitmq.Options{}, nil); err == nil {
		t.Fatal("a nil Runner was accepted")
	}
}

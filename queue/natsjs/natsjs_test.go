package natsjs_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/retryhttp/retryhttp/idempotency"
	"github.com/retryhttp/retryhttp/queue"
	"github.com/retryhttp/retryhttp/queue/natsjs"
	"github.com/retryhttp/retryhttp/shared/natstest"
	"github.com/retryhttp/retryhttp/shared/testenv"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// stream makes a stream and a durable consumer of the test's own, deleted
// when it ends.
func stream(t testing.TB, js jetstream.JetStream, ackWait time.Duration) (subject string, cons jetstream.Consumer) {
	t.Helper()
	ctx := context.Background()
	name := fmt.Sprintf("RETRYHTTP_%d", time.Now().UnixNano())
	subject = strings.ToLower(name) + ".orders"
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{subject}, Duplicates: time.Minute}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { js.DeleteStream(context.Background(), name) })
	cons, err := js.CreateOrUpdateConsumer(ctx, name, jetstream.ConsumerConfig{Durable: "fulfilment", AckPolicy: jetstream.AckExplicitPolicy, AckWait: ackWait})
	if err != nil {
		t.Fatal(err)
	}
	return subject, cons
}

// lostAck is a delivery whose acknowledgement never reaches the server,
// as when the consumer dies between its effect and its ack.
type lostAck struct{ jetstream.Msg }

func (lostAck) Ack() error { return nil }

// counter is a Hook that counts events by kind.
type counter struct {
	mu sync.Mutex
	n  map[queue.EventKind]int
}

func (c *counter) OnEvent(_ context.Context, e natsjs.Event) {
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

// 1,000 orders through a real JetStream consumer, with every fault it
// meets: 100 orders published a second time under another message ID (an
// upstream retry JetStream cannot recognise), 50 republished under the
// same ID (JetStream drops those), one handler run in ten failing (NAK,
// redelivered after a backoff), one ack in twenty lost (redelivered after
// AckWait). Each order's effect happens exactly once.
func TestExactlyOncePerOrder(t *testing.T) {
	js := natstest.JetStream(t)
	subject, cons := stream(t, js, 300*time.Millisecond)
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
	metrics, err := natsjs.NewMetrics(reg, "fulfilment")
	if err != nil {
		t.Fatal(err)
	}
	handler, err := natsjs.Handler(natsjs.Options{
		Runner:  runner,
		Key:     func(m jetstream.Msg) (string, error) { return string(m.Data()), nil }, // the business key
		Backoff: queue.Backoff{Base: 10 * time.Millisecond, Max: 50 * time.Millisecond},
		Hooks:   []natsjs.Hook{hooks, metrics},
		Logger:  quiet(),
	}, func(ctx context.Context, m jetstream.Msg) ([]byte, error) {
		runs.Add(1)
		if chance(0.1) {
			return nil, errors.New("the shipping provider flickered")
		}
		mu.Lock()
		effects[string(m.Data())]++
		mu.Unlock()
		return []byte("shipped"), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	cc, err := cons.Consume(func(m jetstream.Msg) {
		if chance(0.05) {
			m = lostAck{m}
		}
		handler(m)
	})
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Stop()

	ctx := context.Background()
	const orders = 1000
	publish := func(order int, id string) {
		t.Helper()
		if _, err := js.Publish(ctx, subject, []byte(fmt.Sprint("order-", order)), jetstream.WithMsgID(id)); err != nil {
			t.Fatal(err)
		}
	}
	for i := range orders {
		publish(i, fmt.Sprint("msg-", i))
		if i%10 == 0 {
			publish(i, fmt.Sprint("msg-", i, "-again")) // a second event, one business key
		}
		if i%20 == 1 {
			publish(i, fmt.Sprint("msg-", i)) // the same message ID: JetStream's window drops it
		}
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		info, err := cons.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		done := len(effects)
		mu.Unlock()
		if done == orders && info.NumPending == 0 && info.NumAckPending == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 60 s: %d orders done, %d pending, %d awaiting ack", done, info.NumPending, info.NumAckPending)
		}
		time.Sleep(50 * time.Millisecond)
	}
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
		t.Error("no failure was redelivered")
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
	v, ok := testenv.Sum(t, reg, "queue_messages_total", map[string]string{"outcome": outcome, "consumer": "fulfilment", "broker": "nats"})
	if !ok {
		t.Fatalf("no queue_messages_total series for outcome %q", outcome)
	}
	return v
}

// A message without a key cannot be deduplicated: it is terminated, and
// the handler never runs.
func TestMessageWithoutKeyIsTerminated(t *testing.T) {
	js := natstest.JetStream(t)
	subject, cons := stream(t, js, time.Second)
	runner, err := idempotency.NewRunner(idempotency.RunnerOptions{Kind: "fulfilment"})
	if err != nil {
		t.Fatal(err)
	}
	hooks := &counter{}
	var ran atomic.Bool
	handler, err := natsjs.Handler(natsjs.Options{Runner: runner, Hooks: []natsjs.Hook{hooks}, Logger: quiet()},
		func(context.Context, jetstream.Msg) ([]byte, error) { ran.Store(true); return nil, nil })
	if err != nil {
		t.Fatal(err)
	}
	cc, err := cons.Consume(handler)
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Stop()
	if _, err := js.Publish(context.Background(), subject, []byte("no id")); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for hooks.get(queue.EventDead) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the keyless message was not terminated")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if ran.Load() {
		t.Fatal("the handler ran a message that cannot be deduplicated")
	}
	if _, err := natsjs.Handler(natsjs.Options{}, nil); err == nil {
		t.Fatal("a nil Runner was accepted")
	}
}

func quiet() *slog.Logger { return slog.New(slog.DiscardHandler) }

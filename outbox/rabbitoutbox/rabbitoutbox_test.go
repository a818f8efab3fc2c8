package rabbitoutbox_test

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	amqp "github.com/rabbitmq/amqp091-go"
	"go.uber.org/goleak"

	"github.com/retryhttp/retryhttp/idempotency"
	"github.com/retryhttp/retryhttp/outbox"
	"github.com/retryhttp/retryhttp/outbox/internal/outboxtest"
	"github.com/retryhttp/retryhttp/outbox/rabbitoutbox"
	"github.com/retryhttp/retryhttp/queue"
	"github.com/retryhttp/retryhttp/queue/rabbitmq"
	"github.com/retryhttp/retryhttp/shared/faultproxy"
	"github.com/retryhttp/retryhttp/shared/testenv"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// dial reaches the broker at addr (host:port), or the tests' own when
// addr is ""; an unreachable broker skips the test loudly, and fails it
// under CI=true.
func dial(t testing.TB, addr string) func() (*amqp.Connection, error) {
	t.Helper()
	u, err := url.Parse(testenv.AMQPURL())
	if err != nil {
		t.Fatal(err)
	}
	if addr != "" {
		u.Host = addr
	}
	d := func() (*amqp.Connection, error) {
		return amqp.DialConfig(u.String(), amqp.Config{Dial: amqp.DefaultDial(2 * time.Second)})
	}
	conn, err := d()
	if err != nil {
		testenv.Unreachable(t, "RabbitMQ", u.Host, err)
	}
	conn.Close()
	return d
}

func newSender(t testing.TB, d func() (*amqp.Connection, error)) *rabbitoutbox.Sender {
	t.Helper()
	s, err := rabbitoutbox.New(rabbitoutbox.Options{Dial: d})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// testQueue declares a queue of the test's own, deleted when it ends.
func testQueue(t testing.TB, d func() (*amqp.Connection, error)) (*amqp.Connection, string) {
	t.Helper()
	conn, err := d()
	if err != nil {
		t.Fatal(err)
	}
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	name := "retryhttp-outbox-" + uuid.NewString()
	if _, err := ch.QueueDeclare(name, false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ch.QueueDelete(name, false, false, false)
		conn.Close()
	})
	return conn, name
}

// Every message is published twice (its relay lost the first outcome),
// so the queue holds two copies of each, with the message's ID as
// message-id, its header and body; a consumer behind queue/rabbitmq runs
// each message once.
func TestOneEffectPerMessage(t *testing.T) {
	d := dial(t, "")
	p := outboxtest.Pool(t)
	o := outboxtest.New(t, p)
	conn, q := testQueue(t, d)
	const n = 200
	want := map[string]bool{}
	for i := range n {
		id, err := o.Enqueue(context.Background(), p, outbox.Message{URL: rabbitoutbox.URL("", q), Body: fmt.Appendf(nil, "order %d", i),
			Header: map[string][]string{"Content-Type": {"text/plain"}, "Order": {fmt.Sprint(i)}}})
		if err != nil {
			t.Fatal(err)
		}
		want[id] = true
	}
	outboxtest.Run(t, outbox.RelayOptions{Outbox: o, PollInterval: 10 * time.Millisecond,
		Senders: map[string]outbox.Sender{rabbitoutbox.Scheme: outboxtest.Forgetful(newSender(t, d))},
		Backoff: queue.Backoff{Base: 10 * time.Millisecond, Max: 10 * time.Millisecond}})
	outboxtest.Eventually(t, "every message delivered", func() bool { return outboxtest.Pending(t, p, o) == 0 })

	runner, err := idempotency.NewRunner(idempotency.RunnerOptions{Logger: outboxtest.Quiet})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	effects := map[string]int{}
	copies := map[string]int{}
	handle, err := rabbitmq.Handler(rabbitmq.Options{Runner: runner, Logger: outboxtest.Quiet}, func(ctx context.Context, d amqp.Delivery) ([]byte, error) {
		if d.ContentType != "text/plain" || d.Headers["Order"] == nil || !strings.HasPrefix(string(d.Body), "order ") || d.Headers["Idempotency-Key"] != d.MessageId {
			return nil, fmt.Errorf("delivery lost its header or body: %+v", d)
		}
		mu.Lock()
		effects[d.MessageId]++
		mu.Unlock()
		return nil, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	ds, err := ch.Consume(q, "", false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 * n {
		select {
		case dl := <-ds:
			copies[dl.MessageId]++
			handle(context.Background(), dl)
		case <-time.After(10 * time.Second):
			t.Fatalf("the queue held %d deliveries, want %d: each message twice", len(copies), 2*n)
		}
	}
	for id := range want {
		if copies[id] != 2 || effects[id] != 1 {
			t.Fatalf("message %s: %d copies in the queue, %d effects; want 2 and 1", id, copies[id], effects[id])
		}
	}
	if len(effects) != n {
		t.Fatalf("%d messages had an effect, want %d", len(effects), n)
	}
}

func delivery(t *testing.T, raw string) outbox.Delivery {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return outbox.Delivery{ID: uuid.NewString(), Method: "POST", URL: u, Body: []byte("x")}
}

// A message no queue takes is returned (mandatory), not dropped: the Send
// fails with the broker's reason. A missing exchange fails too, and the
// Sender goes on on a new channel; a URL without exchange and key is
// refused for good.
func TestUndeliverable(t *testing.T) {
	d := dial(t, "")
	_, q := testQueue(t, d)
	s := newSender(t, d)
	ctx := context.Background()
	res := s.Send(ctx, delivery(t, rabbitoutbox.URL("", "no-queue-"+uuid.NewString())))
	if res.Err == nil || res.Final || !strings.Contains(res.Err.Error(), "NO_ROUTE") {
		t.Errorf("unroutable: %+v, want a retryable error with the broker's NO_ROUTE", res)
	}
	res = s.Send(ctx, delivery(t, rabbitoutbox.URL("no-exchange-"+uuid.NewString(), "k")))
	if res.Err == nil || res.Final || !strings.Contains(res.Err.Error(), "404") {
		t.Errorf("missing exchange: %+v, want the broker's 404", res)
	}
	if res := s.Send(ctx, delivery(t, rabbitoutbox.URL("", q))); res.Err != nil {
		t.Errorf("after the failures: %v", res.Err)
	}
	for _, bad := range []string{"amqp:no-slash", "amqp://guest:guest@broker:5672/orders"} {
		if res := s.Send(ctx, delivery(t, bad)); res.Err == nil || !res.Final {
			t.Errorf("%s: %+v, want refused for good", bad, res)
		}
	}
	if got := rabbitoutbox.URL("orders/eu", "placed.eu"); got != "amqp:orders%2Feu/placed.eu" {
		t.Errorf("URL: %q", got)
	}
	if _, err := rabbitoutbox.New(rabbitoutbox.Options{}); err == nil {
		t.Error("New without Dial accepted")
	}
}

// A connection cut under the Sender fails the Sends in flight, and the
// next Send dials again.
func TestReconnects(t *testing.T) {
	u, _ := url.Parse(testenv.AMQPURL())
	proxy := faultproxy.Start(t, u.Host)
	d := dial(t, proxy.Addr())
	_, q := testQueue(t, dial(t, ""))
	s := newSender(t, d)
	ctx := context.Background()
	if res := s.Send(ctx, delivery(t, rabbitoutbox.URL("", q))); res.Err != nil {
		t.Fatal(res.Err)
	}
	proxy.CutAll()
	outboxtest.Eventually(t, "a Send on a new connection", func() bool { return s.Send(ctx, delivery(t, rabbitoutbox.URL("", q))).Err == nil })
	s.Close()
	if res := s.Send(ctx, delivery(t, rabbitoutbox.URL("", q))); res.Err == nil {
		t.Error("a Send after Close succeeded")
	}
}

// Through the relay, a message no queue takes is tried again and dead
// after MaxAttempts, the broker's NO_ROUTE as its last error: not
// dropped in silence.
func TestUnroutableIsDeadWithTheReason(t *testing.T) {
	d := dial(t, "")
	p := outboxtest.Pool(t)
	o := outboxtest.New(t, p)
	ctx := context.Background()
	id, err := o.Enqueue(ctx, p, outbox.Message{URL: rabbitoutbox.URL("", "no-queue-"+uuid.NewString())})
	if err != nil {
		t.Fatal(err)
	}
	outboxtest.Run(t, outbox.RelayOptions{Outbox: o, PollInterval: 10 * time.Millisecond, Senders: map[string]outbox.Sender{rabbitoutbox.Scheme: newSender(t, d)},
		MaxDeliveries: 3, Backoff: queue.Backoff{Base: 10 * time.Millisecond, Max: 10 * time.Millisecond}})
	outboxtest.Eventually(t, "the message dead", func() bool {
		s, err := o.State(ctx, id)
		return err == nil && s.Status == outbox.Dead
	})
	if s, _ := o.State(ctx, id); s.Deliveries != 3 || !strings.Contains(s.LastError, "NO_ROUTE") {
		t.Fatalf("%+v, want dead after 3 deliveries with NO_ROUTE", s)
	}
}

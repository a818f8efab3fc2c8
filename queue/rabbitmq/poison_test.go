package rabbitmq_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/retryhttp/retryhttp/idempotency"
	"github.com/retryhttp/retryhttp/queue"
	rqueue "github.com/retryhttp/retryhttp/queue"
	"github.com/retryhttp/retryhttp/queue/rabbitmq"
)

// quorumQueue declares a quorum queue (which counts deliveries) of the
// test's own, deleted when it ends.
func quorumQueue(t *testing.T, conn *amqp.Connection) string {
	t.Helper()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	name := fmt.Sprintf("retryhttp-test-quorum-%d", time.Now().UnixNano())
	if _, err := ch.QueueDeclare(name, true, false, false, false, amqp.Table{"x-queue-type": "quorum"}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if ch, err := conn.Channel(); err == nil {
			ch.QueueDelete(name, false, false, false)
			ch.Close()
		}
	})
	return name
}

// recorder keeps each event, in order.
type recorder struct {
	mu     sync.Mutex
	events []rabbitmq.Event
}

// hook is a HookFunc that keeps each event in r.
func (r *recorder) hook() rabbitmq.Hook {
	return rabbitmq.HookFunc(func(_ context.Context, e rabbitmq.Event) {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.events = append(r.events, e)
	})
}

func (r *recorder) of(key string) []rabbitmq.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []rabbitmq.Event
	for _, e := range r.events {
		if e.Key == key {
			out = append(out, e)
		}
	}
	return out
}

func kinds(events []rabbitmq.Event) []queue.EventKind {
	out := make([]queue.EventKind, len(events))
	for i, e := range events {
		out[i] = e.Kind
	}
	return out
}

// waitFor polls cond for up to 20 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after 20 s: %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// publish sends bodies to the queue, confirmed.
func publish(t *testing.T, conn *amqp.Connection, name string, bodies ...string) {
	t.Helper()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	for _, b := range bodies {
		c, err := ch.PublishWithDeferredConfirmWithContext(context.Background(), "", name, true, false, amqp.Publishing{Body: []byte(b)})
		if err != nil {
			t.Fatal(err)
		}
		if ok, err := c.WaitContext(context.Background()); !ok || err != nil {
			t.Fatalf("publish %s not confirmed: %v", b, err)
		}
	}
}

// consume runs h through rabbitmq.Handler on the queue until the test
// ends, keyed by the body, with a short backoff and MaxAttempts 3, each
// delivery on a goroutine of its own (prefetch 10).
func consume(t *testing.T, conn *amqp.Connection, name string, rec *recorder, h func(context.Context, amqp.Delivery) ([]byte, error)) {
	t.Helper()
	runner, err := idempotency.NewRunner(idempotency.RunnerOptions{Kind: "fulfilment"})
	if err != nil {
		t.Fatal(err)
	}
	handle, err := rabbitmq.Handler(rabbitmq.Options{
		Runner:      runner,
		Key:         func(d amqp.Delivery) (string, error) { return string(d.Body), nil },
		MaxAttempts: 3, Backoff: queue.Backoff{Base: 10 * time.Millisecond, Max: 20 * time.Millisecond},
		Hooks:  []rabbitmq.Hook{rec.hook()},
		Logger: slog.New(slog.DiscardHandler),
	}, h)
	if err != nil {
		t.Fatal(err)
	}
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	ch.Qos(10, 0, false)
	const tag = "poison-test"
	ds, err := ch.Consume(name, tag, false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	done := make(chan struct{})
	go func() {
		defer close(done)
		for d := range ds {
			wg.Add(1)
			go func() { defer wg.Done(); handle(context.Background(), d) }()
		}
	}()
	t.Cleanup(func() {
		ch.Cancel(tag, false) // ds closes once the broker confirms
		<-done
		wg.Wait()
		ch.Close()
	})
}

// A handler that panics on one delivery has failed its run: the consumer
// recovers, requeues it after its backoff and rejects it at MaxAttempts
// (a quorum queue counts deliveries), and the orders beside it ship.
func TestPanickingHandlerIsBounded(t *testing.T) {
	conn := dial(t)
	name := quorumQueue(t, conn)
	rec := &recorder{}
	var poisonRuns atomic.Int32
	var shipped sync.Map
	consume(t, conn, name, rec, func(_ context.Context, d amqp.Delivery) ([]byte, error) {
		if string(d.Body) == "poison" {
			poisonRuns.Add(1)
			panic("unparsable order")
		}
		shipped.Store(string(d.Body), true)
		return nil, nil
	})
	publish(t, conn, name, "poison", "order-1", "order-2", "order-3", "order-4", "order-5")
	allShipped := func() bool {
		for i := 1; i <= 5; i++ {
			if _, ok := shipped.Load(fmt.Sprint("order-", i)); !ok {
				return false
			}
		}
		return true
	}
	waitFor(t, "the poison message ended and the orders beside it shipped", func() bool {
		ev := rec.of("poison")
		return len(ev) > 0 && ev[len(ev)-1].Kind == queue.EventDead && allShipped()
	})
	ev := rec.of("poison")
	want := []queue.EventKind{queue.EventFailed, queue.EventFailed, queue.EventDead}
	if fmt.Sprint(kinds(ev)) != fmt.Sprint(want) {
		t.Fatalf("the poison delivery's events: %v, want %v", kinds(ev), want)
	}
	var p *rqueue.PanicError
	if !errors.As(ev[0].Err, &p) || p.Value != "unparsable order" || len(p.Stack) == 0 {
		t.Errorf("a failed run's error %v is not the panic with its stack", ev[0].Err)
	}
	if n := poisonRuns.Load(); n != 3 {
		t.Errorf("the poison delivery ran %d times, want MaxAttempts 3", n)
	}
}

// A handler that knows a message can never succeed returns
// queue.Permanent: the delivery is rejected after its first run, on a
// classic queue too, which counts no deliveries.
func TestPermanentFailureIsRejectedAtOnce(t *testing.T) {
	conn := dial(t)
	name := testQueue(t, conn)
	rec := &recorder{}
	var runs atomic.Int32
	consume(t, conn, name, rec, func(context.Context, amqp.Delivery) ([]byte, error) {
		runs.Add(1)
		return nil, rqueue.Permanent(errors.New("the order no longer exists"))
	})
	publish(t, conn, name, "order-9")
	waitFor(t, "the delivery was not rejected", func() bool { return len(rec.of("order-9")) > 0 })
	if got := kinds(rec.of("order-9")); len(got) != 1 || got[0] != queue.EventDead {
		t.Errorf("events %v, want one rejected", got)
	}
	if n := runs.Load(); n != 1 {
		t.Errorf("the handler ran %d times, want 1", n)
	}
}

// A delivery whose earlier deliveries were never acknowledged (a consumer
// that crashed on each: its channel closed) arrives past MaxAttempts: it
// is rejected without running the handler again.
func TestDeliveryPastMaxAttemptsIsNotRun(t *testing.T) {
	conn := dial(t)
	name := quorumQueue(t, conn)
	publish(t, conn, name, "order-crash")
	for range 3 { // a consumer that takes it and dies
		ch, err := conn.Channel()
		if err != nil {
			t.Fatal(err)
		}
		var ok bool
		waitFor(t, "the delivery did not come back", func() bool {
			_, ok, err = ch.Get(name, false)
			return ok || err != nil
		})
		if err != nil {
			t.Fatal(err)
		}
		ch.Close()
	}
	rec := &recorder{}
	var runs atomic.Int32
	consume(t, conn, name, rec, func(context.Context, amqp.Delivery) ([]byte, error) {
		runs.Add(1)
		return nil, nil
	})
	waitFor(t, "the fourth delivery was not handled", func() bool { return len(rec.of("order-crash")) > 0 })
	ev := rec.of("order-crash")
	if ev[0].Kind != queue.EventDead || ev[0].Attempt != 4 {
		t.Errorf("the fourth delivery: %v as delivery %d, want rejected as the 4th", ev[0].Kind, ev[0].Attempt)
	}
	if n := runs.Load(); n != 0 {
		t.Errorf("the handler ran %d times past MaxAttempts", n)
	}
}

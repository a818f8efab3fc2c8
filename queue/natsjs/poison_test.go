package natsjs_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/retryhttp/retryhttp/idempotency"
	"github.com/retryhttp/retryhttp/queue"
	"github.com/retryhttp/retryhttp/queue/natsjs"
	"github.com/retryhttp/retryhttp/shared/natstest"
)

// recorder keeps each event, in order.
type recorder struct {
	mu     sync.Mutex
	events []natsjs.Event
}

// hook is a HookFunc that keeps each event in r.
func (r *recorder) hook() natsjs.Hook {
	return natsjs.HookFunc(func(_ context.Context, e natsjs.Event) {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.events = append(r.events, e)
	})
}

// of returns the events of key, in order.
func (r *recorder) of(key string) []natsjs.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []natsjs.Event
	for _, e := range r.events {
		if e.Key == key {
			out = append(out, e)
		}
	}
	return out
}

// waitFor polls cond for up to 20 s: the broker's redeliveries take their
// backoff, and a loaded machine is slow.
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

// consume runs h through natsjs.Handler on cons until the test ends, keyed
// by the message's data, with a short backoff and MaxAttempts 3.
func consume(t *testing.T, cons jetstream.Consumer, rec *recorder, ackWait time.Duration, h func(context.Context, jetstream.Msg) ([]byte, error)) {
	t.Helper()
	runner, err := idempotency.NewRunner(idempotency.RunnerOptions{Kind: "fulfilment"})
	if err != nil {
		t.Fatal(err)
	}
	handler, err := natsjs.Handler(natsjs.Options{
		Runner:      runner,
		Key:         func(m jetstream.Msg) (string, error) { return string(m.Data()), nil },
		MaxAttempts: 3, Backoff: queue.Backoff{Base: 10 * time.Millisecond, Max: 20 * time.Millisecond},
		AckWait: ackWait,
		Hooks:   []natsjs.Hook{rec.hook()},
		Logger:  quiet(),
	}, h)
	if err != nil {
		t.Fatal(err)
	}
	cc, err := cons.Consume(handler)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cc.Stop)
}

func kinds(events []natsjs.Event) []queue.EventKind {
	out := make([]queue.EventKind, len(events))
	for i, e := range events {
		out[i] = e.Kind
	}
	return out
}

// A handler that panics on one message has failed its run: the consumer
// recovers, redelivers the message with its backoff and terminates it at
// MaxAttempts, and the orders behind it ship.
func TestPanickingHandlerIsBounded(t *testing.T) {
	js := natstest.JetStream(t)
	subject, cons := stream(t, js, time.Second)
	rec := &recorder{}
	var poisonRuns atomic.Int32
	var shipped sync.Map
	consume(t, cons, rec, time.Second, func(_ context.Context, m jetstream.Msg) ([]byte, error) {
		if string(m.Data()) == "poison" {
			poisonRuns.Add(1)
			panic("unparsable order")
		}
		shipped.Store(string(m.Data()), true)
		return nil, nil
	})
	ctx := context.Background()
	for _, order := range []string{"poison", "order-1", "order-2", "order-3", "order-4", "order-5"} {
		if _, err := js.Publish(ctx, subject, []byte(order)); err != nil {
			t.Fatal(err)
		}
	}
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
		t.Fatalf("the poison message's events: %v, want %v", kinds(ev), want)
	}
	var p *queue.PanicError
	if !errors.As(ev[0].Err, &p) || p.Value != "unparsable order" || len(p.Stack) == 0 {
		t.Errorf("a failed run's error %v is not the panic with its stack", ev[0].Err)
	}
	if n := poisonRuns.Load(); n != 3 {
		t.Errorf("the poison message ran %d times, want MaxAttempts 3", n)
	}
}

// A handler that knows a message can never succeed returns
// queue.Permanent: the message is terminated after its first run.
func TestPermanentFailureIsTerminatedAtOnce(t *testing.T) {
	js := natstest.JetStream(t)
	subject, cons := stream(t, js, time.Second)
	rec := &recorder{}
	var runs atomic.Int32
	consume(t, cons, rec, time.Second, func(context.Context, jetstream.Msg) ([]byte, error) {
		runs.Add(1)
		return nil, queue.Permanent(errors.New("the order no longer exists"))
	})
	if _, err := js.Publish(context.Background(), subject, []byte("order-9")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the message was not terminated", func() bool { return len(rec.of("order-9")) > 0 })
	if got := kinds(rec.of("order-9")); len(got) != 1 || got[0] != queue.EventDead {
		t.Errorf("events %v, want one terminated", got)
	}
	if n := runs.Load(); n != 1 {
		t.Errorf("the handler ran %d times, want 1", n)
	}
}

// A message whose earlier deliveries were never acknowledged (a consumer
// that crashed on each) arrives past MaxAttempts: it is terminated without
// running the handler again.
func TestDeliveryPastMaxAttemptsIsNotRun(t *testing.T) {
	js := natstest.JetStream(t)
	subject, cons := stream(t, js, 200*time.Millisecond)
	ctx := context.Background()
	if _, err := js.Publish(ctx, subject, []byte("order-crash")); err != nil {
		t.Fatal(err)
	}
	// Three deliveries that a crashing consumer took and never answered.
	for range 3 {
		batch, err := cons.Fetch(1, jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for range batch.Messages() {
			n++
		}
		if n != 1 {
			t.Fatalf("fetched %d messages, want the one (%v)", n, batch.Error())
		}
	}
	rec := &recorder{}
	var runs atomic.Int32
	consume(t, cons, rec, time.Second, func(context.Context, jetstream.Msg) ([]byte, error) {
		runs.Add(1)
		return nil, nil
	})
	waitFor(t, "the fourth delivery was not handled", func() bool { return len(rec.of("order-crash")) > 0 })
	ev := rec.of("order-crash")
	if ev[0].Kind != queue.EventDead || ev[0].Attempt != 4 {
		t.Errorf("the fourth delivery: %v after %d deliveries, want terminated after 4", ev[0].Kind, ev[0].Attempt)
	}
	if n := runs.Load(); n != 0 {
		t.Errorf("the handler ran %d times past MaxAttempts", n)
	}
}

// A handler that runs longer than AckWait keeps its message: it is marked
// in progress while it runs, so JetStream delivers it once.
func TestLongHandlerKeepsItsMessage(t *testing.T) {
	js := natstest.JetStream(t)
	const ackWait = 200 * time.Millisecond
	subject, cons := stream(t, js, ackWait)
	rec := &recorder{}
	var runs atomic.Int32
	consume(t, cons, rec, ackWait, func(context.Context, jetstream.Msg) ([]byte, error) {
		runs.Add(1)
		time.Sleep(4 * ackWait)
		return nil, nil
	})
	if _, err := js.Publish(context.Background(), subject, []byte("order-slow")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the slow order was not processed", func() bool {
		for _, e := range rec.of("order-slow") {
			if e.Kind == queue.EventProcessed {
				return true
			}
		}
		return false
	})
	time.Sleep(2 * ackWait) // a redelivery, had there been one, arrives meanwhile
	ev := rec.of("order-slow")
	if len(ev) != 1 || ev[0].Attempt != 1 {
		t.Errorf("events %v (last after %d deliveries), want one processed delivery", kinds(ev), ev[len(ev)-1].Attempt)
	}
	if n := runs.Load(); n != 1 {
		t.Errorf("the handler ran %d times", n)
	}
}

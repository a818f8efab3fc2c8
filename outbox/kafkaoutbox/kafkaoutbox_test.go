package kafkaoutbox_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"

	"github.com/retryhttp/retryhttp/idempotency"
	"github.com/retryhttp/retryhttp/outbox"
	"github.com/retryhttp/retryhttp/outbox/internal/outboxtest"
	"github.com/retryhttp/retryhttp/outbox/kafkaoutbox"
	"github.com/retryhttp/retryhttp/queue"
	"github.com/retryhttp/retryhttp/queue/kafka"
	"github.com/retryhttp/retryhttp/shared/kafkatest"
)

func TestMain(m *testing.M) {
	code := kafkatest.Main(m)
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}
	os.Exit(code)
}

func newSender(t testing.TB, addr string, opts ...kgo.Opt) *kafkaoutbox.Sender {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.AllowAutoTopicCreation()}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	s, err := kafkaoutbox.New(cl)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// readAll reads every record of topic from its start, until it has n.
func readAll(t testing.TB, addr, topic string, n int) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var rs []*kgo.Record
	for len(rs) < n && ctx.Err() == nil {
		rs = append(rs, cl.PollFetches(ctx).Records()...)
	}
	if len(rs) != n {
		t.Fatalf("%s holds %d records after a minute, want %d", topic, len(rs), n)
	}
	return rs
}

// consume runs a Consumer of queue/kafka, with its default key, over topic
// from its start until it has reported n outcomes, calling effect (one
// call at a time) for each record it runs, and returns the outcomes.
func consume(t *testing.T, addr, topic string, n int, effect func(*kgo.Record)) []kafka.Event {
	t.Helper()
	runner, err := idempotency.NewRunner(idempotency.RunnerOptions{Logger: outboxtest.Quiet})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	events := make(chan kafka.Event, 2*n)
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumerGroup("fulfilment"), kgo.ConsumeTopics(topic),
		kgo.DisableAutoCommit(), kgo.BlockRebalanceOnPoll(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	c, err := kafka.NewConsumer(cl, kafka.Options{Runner: runner, Logger: outboxtest.Quiet,
		Hooks: []kafka.Hook{kafka.HookFunc(func(_ context.Context, e kafka.Event) { events <- e })}},
		func(ctx context.Context, r *kgo.Record) ([]byte, error) {
			mu.Lock()
			effect(r)
			mu.Unlock()
			return nil, nil
		})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); c.Run(ctx) }()
	defer func() { cancel(); <-done }()
	var out []kafka.Event
	for range n {
		select {
		case e := <-events:
			out = append(out, e)
		case <-time.After(time.Minute):
			t.Fatal("the consumer went a minute without an outcome")
		}
	}
	return out
}

func header(r *kgo.Record, key string) string {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}

func TestNewRefusesAProducerThatCanLoseOrDouble(t *testing.T) {
	b := kafkatest.Start(t, 1)
	if _, err := kafkaoutbox.New(nil); err == nil {
		t.Error("New(nil) returned no error")
	}
	if _, err := kgo.NewClient(kgo.SeedBrokers(b.Addr), kgo.RequiredAcks(kgo.LeaderAck())); err == nil {
		t.Error("franz-go made an idempotent producer that waits for the leader alone: New must refuse such a client")
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr), kgo.DisableIdempotentWrite())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if s, err := kafkaoutbox.New(cl); err == nil || s != nil {
		t.Errorf("a producer that is not idempotent: New returned %v, %v; want an error", s, err)
	}
}

// Every message is produced twice (its relay lost the first outcome):
// the topic holds two records of each, with the message's ID in
// MessageIDHeader, its header, its body, and the business key as the
// record's key, both in the key's one partition; a Consumer of
// queue/kafka runs each order once.
func TestOneEffectPerMessage(t *testing.T) {
	b := kafkatest.Start(t, 4)
	p := outboxtest.Pool(t)
	o := outboxtest.New(t, p)
	topic := "orders-" + uuid.NewString()[:8]
	const n = 200
	ids := map[string]string{} // message ID: order
	for i := range n {
		order := fmt.Sprint("order-", i)
		id, err := o.Enqueue(context.Background(), p, outbox.Message{URL: kafkaoutbox.URL(topic, order), Body: fmt.Appendf(nil, "placed %d", i),
			Header: http.Header{"Idempotency-Key": {order}, "Content-Type": {"text/plain"}}})
		if err != nil {
			t.Fatal(err)
		}
		ids[id] = order
	}
	outboxtest.Run(t, outbox.RelayOptions{Outbox: o, PollInterval: 10 * time.Millisecond,
		Senders: map[string]outbox.Sender{kafkaoutbox.Scheme: outboxtest.Forgetful(newSender(t, b.Addr))},
		Backoff: queue.Backoff{Base: 10 * time.Millisecond, Max: 10 * time.Millisecond}})
	outboxtest.Eventually(t, "every message delivered", func() bool { return outboxtest.Pending(t, p, o) == 0 })

	copies := map[string]int{}
	partitionOf := map[string]int32{}
	for _, r := range readAll(t, b.Addr, topic, 2*n) {
		id := header(r, kafkaoutbox.MessageIDHeader)
		order, ok := ids[id]
		switch {
		case !ok:
			t.Fatalf("a record with message ID %q, not one of the outbox's", id)
		case string(r.Key) != order || header(r, "Idempotency-Key") != order || header(r, "Content-Type") != "text/plain" ||
			!strings.HasPrefix(string(r.Value), "placed "):
			t.Fatalf("record %s lost its key, header or body: key %q, headers %v, value %q", id, r.Key, r.Headers, r.Value)
		}
		if p, seen := partitionOf[order]; seen && p != r.Partition {
			t.Fatalf("%s's records are in partitions %d and %d: one key, one partition", order, p, r.Partition)
		}
		partitionOf[order] = r.Partition
		copies[id]++
	}
	for id, c := range copies {
		if c != 2 {
			t.Fatalf("message %s: %d records, want 2", id, c)
		}
	}

	effects := map[string]int{}
	consume(t, b.Addr, topic, 2*n, func(r *kgo.Record) { effects[string(r.Key)]++ })
	for _, order := range ids {
		if effects[order] != 1 {
			t.Fatalf("%s had %d effects, want 1", order, effects[order])
		}
	}
}

// Messages enqueued without a key of their own (no header, a header
// without one, an empty one), and with one under each name, reach the
// topic with an Idempotency-Key header: their own, or their ID. Each is
// produced twice, and a Consumer of queue/kafka with its default key runs
// each message once and dead-letters none.
func TestDefaultKey(t *testing.T) {
	b := kafkatest.Start(t, 2)
	p := outboxtest.Pool(t)
	o := outboxtest.New(t, p)
	topic := "keyless-" + uuid.NewString()[:8]
	family := outboxtest.KeyFamily(24)
	want := map[string]string{} // message ID: its key
	for i, k := range family {
		key := "" // the record's key from the header, or from the URL for every other message
		if i%2 == 1 {
			key = fmt.Sprint("order-", i)
		}
		id, err := o.Enqueue(context.Background(), p, outbox.Message{URL: kafkaoutbox.URL(topic, key), Header: k.Header, Body: []byte("placed")})
		if err != nil {
			t.Fatal(err)
		}
		want[id] = k.Key
		if k.Key == "" {
			want[id] = id
		}
	}
	outboxtest.Run(t, outbox.RelayOptions{Outbox: o, PollInterval: 10 * time.Millisecond,
		Senders: map[string]outbox.Sender{kafkaoutbox.Scheme: outboxtest.Forgetful(newSender(t, b.Addr))},
		Backoff: queue.Backoff{Base: 10 * time.Millisecond, Max: 10 * time.Millisecond}})
	outboxtest.Eventually(t, "every message delivered", func() bool { return outboxtest.Pending(t, p, o) == 0 })
	for _, r := range readAll(t, b.Addr, topic, 2*len(family)) {
		id := header(r, kafkaoutbox.MessageIDHeader)
		if got := header(r, kafka.KeyHeader); got != want[id] {
			t.Fatalf("message %s reached Kafka with %s %q, want %q (headers %v)", id, kafka.KeyHeader, got, want[id], r.Headers)
		}
	}

	effects := map[string]int{}
	for _, e := range consume(t, b.Addr, topic, 2*len(family), func(r *kgo.Record) { effects[header(r, kafkaoutbox.MessageIDHeader)]++ }) {
		if e.Kind != queue.EventProcessed && e.Kind != queue.EventDuplicate {
			t.Errorf("the consumer reported %v for a record: %v", e.Kind, e.Err)
		}
	}
	for id := range want {
		if effects[id] != 1 {
			t.Errorf("message %s had %d effects, want 1", id, effects[id])
		}
	}
}

// A URL without a valid topic is refused for good; a topic that does not
// exist (and the broker will not create) is a failure the relay tries
// again.
func TestUndeliverable(t *testing.T) {
	b := kafkatest.Start(t, 1)
	s := newSender(t, b.Addr)
	ctx := context.Background()
	for _, u := range []*url.URL{
		{Scheme: "kafka"},                           // no topic
		{Scheme: "kafka", Opaque: "bad topic"},      // a space
		{Scheme: "kafka", Host: "host", Path: "/t"}, // a broker, not a topic
		{Scheme: "kafka", Opaque: strings.Repeat("x", 250)},
		{Scheme: "kafka", Opaque: "t", RawQuery: "key=%zz"},
	} {
		if r := s.Send(ctx, outbox.Delivery{ID: "m", URL: u}); r.Err == nil || !r.Final {
			t.Errorf("%s: %+v, want a final error", u, r)
		}
	}
	strictClient, err := kgo.NewClient(kgo.SeedBrokers(b.Addr), kgo.UnknownTopicRetries(1)) // no auto-creation
	if err != nil {
		t.Fatal(err)
	}
	defer strictClient.Close()
	strict, err := kafkaoutbox.New(strictClient)
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(kafkaoutbox.URL("missing-"+uuid.NewString()[:8], "k"))
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if r := strict.Send(cctx, outbox.Delivery{ID: "m", URL: u}); r.Err == nil || r.Final {
		t.Errorf("a missing topic: %+v, want an error to try again", r)
	}
}

// The broker SIGKILLed under the relay and started again on its data:
// the messages enqueued meanwhile wait and are delivered once it is back,
// none lost; kcat, a second client, reads every one with its key and its
// message ID.
func TestBrokerKilledUnderTheRelay(t *testing.T) {
	kcat := kafkatest.Kcat(t)
	topic := "orders-" + uuid.NewString()[:8]
	b := kafkatest.Start(t, 2, topic) // named at the start: it survives the SIGKILL
	p := outboxtest.Pool(t)
	o := outboxtest.New(t, p)
	outboxtest.Run(t, outbox.RelayOptions{Outbox: o, PollInterval: 10 * time.Millisecond,
		Senders: map[string]outbox.Sender{kafkaoutbox.Scheme: newSender(t, b.Addr)}, MaxDeliveries: 1000,
		Backoff: queue.Backoff{Base: 20 * time.Millisecond, Max: 100 * time.Millisecond}})
	ctx := context.Background()
	enqueue := func(from, to int) {
		for i := from; i < to; i++ {
			if _, err := o.Enqueue(ctx, p, outbox.Message{URL: kafkaoutbox.URL(topic, fmt.Sprint("order-", i)), Body: fmt.Appendf(nil, "placed %d", i)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	enqueue(0, 100)
	outboxtest.Eventually(t, "the first 100 delivered", func() bool { return outboxtest.Pending(t, p, o) == 0 })
	b.Kill()
	enqueue(100, 200)
	time.Sleep(200 * time.Millisecond) // the relay tries, and fails, with the broker down
	if n := outboxtest.Pending(t, p, o); n != 100 {
		t.Fatalf("%d messages pending with the broker down, want the 100 enqueued meanwhile", n)
	}
	b.Start()
	outboxtest.Eventually(t, "the rest delivered once the broker is back", func() bool { return outboxtest.Pending(t, p, o) == 0 })

	out, err := exec.Command(kcat, "-C", "-b", b.Addr, "-t", topic, "-o", "beginning", "-e", "-q",
		"-f", "%k %h\n").CombinedOutput()
	if err != nil {
		t.Fatalf("kcat: %v\n%s", err, out)
	}
	seen := map[string]bool{}
	for line := range strings.Lines(string(out)) {
		key, headers, _ := strings.Cut(strings.TrimSpace(line), " ")
		if !strings.Contains(headers, kafkaoutbox.MessageIDHeader+"=") {
			t.Fatalf("kcat read %q: no %s header", line, kafkaoutbox.MessageIDHeader)
		}
		seen[key] = true
	}
	for i := range 200 {
		if !seen[fmt.Sprint("order-", i)] {
			t.Fatalf("order-%d is not in the topic as kcat reads it (%d keys read)", i, len(seen))
		}
	}
}

package kafka_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"

	"github.com/retryhttp/retryhttp"
	"github.com/retryhttp/retryhttp/idempotency"
	"github.com/retryhttp/retryhttp/queue"
	"github.com/retryhttp/retryhttp/queue/kafka"
	"github.com/retryhttp/retryhttp/shared/kafkatest"
	"github.com/retryhttp/retryhttp/shared/testenv"
)

func TestMain(m *testing.M) {
	code := kafkatest.Main(m)
	if code == 0 && os.Getenv(childTopic) == "" {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}
	os.Exit(code)
}

var quietLog = slog.New(slog.DiscardHandler)

// consumerClient is a client of group reading topic as NewConsumer wants
// one, closed when the test ends.
func consumerClient(t testing.TB, addr, group, topic string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.DisableAutoCommit(), kgo.BlockRebalanceOnPoll(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.AllowAutoTopicCreation()}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// produce writes records to topic, each with its key header, and waits
// for the broker to have them.
func produce(t testing.TB, addr, topic string, records ...*kgo.Record) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.AllowAutoTopicCreation(), kgo.DefaultProduceTopic(topic))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.ProduceSync(context.Background(), records...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

func keyed(key, value string) *kgo.Record {
	r := &kgo.Record{Key: []byte(key), Value: []byte(value)}
	if key != "" {
		r.Headers = []kgo.RecordHeader{{Key: kafka.KeyHeader, Value: []byte(key)}}
	}
	return r
}

// recorder keeps a consumer's events.
type recorder struct{ testenv.Recorder[kafka.Event] }

func newRecorder() *recorder { return &recorder{} }

// count is how many events of kind have come.
func (r *recorder) count(kind queue.EventKind) int {
	return r.Count(func(e kafka.Event) bool { return e.Kind == kind })
}

// await waits until cond holds (testenv.Eventually).
func (r *recorder) await(t testing.TB, what string, cond func() bool) {
	t.Helper()
	testenv.Eventually(t, what, cond)
}

func memoryRunner(t testing.TB) *idempotency.Runner {
	t.Helper()
	r, err := idempotency.NewRunner(idempotency.RunnerOptions{Kind: "test", Logger: quietLog, LockTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// run runs c until the test ends.
func run(t testing.TB, c *kafka.Consumer) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); c.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
}

// committed is the group's committed offset of each partition of topic.
func committed(t testing.TB, addr, group, topic string) map[int32]int64 {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	offsets, err := kadm.NewClient(cl).FetchOffsets(context.Background(), group)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int32]int64{}
	for p, o := range offsets[topic] {
		out[p] = o.At
	}
	return out
}

func TestNewConsumerRefusesWhatCannotWork(t *testing.T) {
	b := kafkatest.Start(t, 1)
	runner := memoryRunner(t)
	h := func(context.Context, *kgo.Record) ([]byte, error) { return nil, nil }
	plain := func(opts ...kgo.Opt) *kgo.Client {
		cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(b.Addr)}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl
	}
	for _, tc := range []struct {
		name string
		cl   *kgo.Client
		o    kafka.Options
		h    kafka.Handler
	}{
		{"nil client", nil, kafka.Options{Runner: runner}, h},
		{"nil Runner", consumerClient(t, b.Addr, "g", "t"), kafka.Options{}, h},
		{"nil handler", consumerClient(t, b.Addr, "g", "t"), kafka.Options{Runner: runner}, nil},
		{"negative MaxAttempts", consumerClient(t, b.Addr, "g", "t"), kafka.Options{Runner: runner, MaxAttempts: -1}, h},
		{"bad Backoff", consumerClient(t, b.Addr, "g", "t"), kafka.Options{Runner: runner, Backoff: queue.Backoff{Base: -1}}, h},
		{"no group", plain(kgo.ConsumeTopics("t")), kafka.Options{Runner: runner}, h},
		{"autocommit", plain(kgo.ConsumerGroup("g"), kgo.ConsumeTopics("t"), kgo.BlockRebalanceOnPoll()), kafka.Options{Runner: runner}, h},
		{"rebalance not blocked", plain(kgo.ConsumerGroup("g"), kgo.ConsumeTopics("t"), kgo.DisableAutoCommit()), kafka.Options{Runner: runner}, h},
	} {
		if c, err := kafka.NewConsumer(tc.cl, tc.o, tc.h); err == nil || c != nil {
			t.Errorf("%s: NewConsumer returned %v, %v; want an error", tc.name, c, err)
		}
	}
}

// Records run once per key: a key produced twice runs once and its second
// record is a duplicate; every offset is committed once its record's
// outcome is stored, so the group's next member reads nothing again.
func TestEachKeyRunsOnceAndIsCommitted(t *testing.T) {
	b := kafkatest.Start(t, 3)
	const topic, group = "orders", "fulfilment"
	var records []*kgo.Record
	for i := range 30 {
		records = append(records, keyed(fmt.Sprint("order-", i%20), fmt.Sprint("event ", i)))
	}
	produce(t, b.Addr, topic, records...)
	var mu sync.Mutex
	ran := map[string]int{}
	rec := newRecorder()
	c, err := kafka.NewConsumer(consumerClient(t, b.Addr, group, topic), kafka.Options{Runner: memoryRunner(t), Logger: quietLog, Hooks: []kafka.Hook{rec}},
		func(ctx context.Context, r *kgo.Record) ([]byte, error) {
			mu.Lock()
			ran[string(r.Key)]++
			mu.Unlock()
			return []byte("shipped " + string(r.Key)), nil
		})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); c.Run(ctx) }()
	rec.await(t, "30 records run or replayed", func() bool { return rec.count(queue.EventProcessed)+rec.count(queue.EventDuplicate) == 30 })
	cancel()
	<-done
	if got := rec.count(queue.EventDuplicate); got != 10 {
		t.Errorf("%d duplicates, want 10", got)
	}
	for key, n := range ran {
		if n != 1 {
			t.Errorf("%s ran %d times, want 1", key, n)
		}
	}
	if len(ran) != 20 {
		t.Errorf("%d keys ran, want 20", len(ran))
	}
	var total int64
	for _, at := range committed(t, b.Addr, group, topic) {
		total += at
	}
	if total != 30 {
		t.Errorf("committed offsets add up to %d, want 30 (every record)", total)
	}
}

// A record that keeps failing runs MaxAttempts times, goes to the
// dead-letter topic with where it came from and why, and the records
// behind it in its partition run; one without a key and one whose handler
// says the failure is permanent go there at once, and a panicking handler
// is a failed attempt, not a dead consumer.
func TestFailuresAreBoundedAndDeadLettered(t *testing.T) {
	b := kafkatest.Start(t, 1) // one partition: the records behind the bad one wait for it
	const topic, group = "payments", "charger"
	produce(t, b.Addr, topic, keyed("bad", "always fails"), keyed("", "no key"), keyed("permanent", "unparseable"),
		keyed("panics", "panics once"), keyed("good", "fine"))
	var mu sync.Mutex
	ran := map[string]int{}
	rec := newRecorder()
	c, err := kafka.NewConsumer(consumerClient(t, b.Addr, group, topic), kafka.Options{Runner: memoryRunner(t), Logger: quietLog,
		Hooks: []kafka.Hook{rec}, MaxAttempts: 3, Backoff: queue.Backoff{Base: time.Millisecond, Max: 5 * time.Millisecond}},
		func(ctx context.Context, r *kgo.Record) ([]byte, error) {
			mu.Lock()
			ran[string(r.Key)]++
			n := ran[string(r.Key)]
			mu.Unlock()
			switch string(r.Key) {
			case "bad":
				return nil, errors.New("the payment provider refused")
			case "permanent":
				return nil, queue.Permanent(errors.New("the event does not parse"))
			case "panics":
				if n == 1 {
					panic("nil map")
				}
			}
			return nil, nil
		})
	if err != nil {
		t.Fatal(err)
	}
	run(t, c)
	rec.await(t, "two records processed and three dead", func() bool {
		return rec.count(queue.EventProcessed) == 2 && rec.count(queue.EventDead) == 3
	})
	mu.Lock()
	if ran["bad"] != 3 || ran["permanent"] != 1 || ran["panics"] != 2 || ran["good"] != 1 || ran[""] != 0 {
		t.Errorf("runs %v, want bad 3 (MaxAttempts), permanent 1, panics 2, good 1, no key 0", ran)
	}
	mu.Unlock()

	dl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr), kgo.ConsumeTopics(topic+kafka.DeadLetterSuffix), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer dl.Close()
	dead := map[string]map[string]string{}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for len(dead) < 3 && ctx.Err() == nil {
		dl.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
			h := map[string]string{}
			for _, hd := range r.Headers {
				h[hd.Key] = string(hd.Value)
			}
			dead[string(r.Value)] = h
		})
	}
	for value, offset := range map[string]string{"always fails": "0", "no key": "1", "unparseable": "2"} {
		h, ok := dead[value]
		if !ok {
			t.Errorf("%q is not in the dead-letter topic (it holds %v)", value, dead)
			continue
		}
		if h[kafka.HeaderDeadTopic] != topic || h[kafka.HeaderDeadPartition] != "0" || h[kafka.HeaderDeadOffset] != offset || h[kafka.HeaderDeadError] == "" {
			t.Errorf("%q dead-lettered with headers %v, want its topic, partition 0, offset %s and an error", value, h, offset)
		}
	}
}

// childTopic, when set, makes the test binary a consumer process of
// TestConsumersKilled.
const childTopic = "KAFKA_TEST_CHILD_TOPIC"

// A failing record holds back the records behind it in its partition for
// its backoffs, and only them: the other partition's records of the same
// poll run meanwhile, and the failing one's partition moves on once it is
// dead-lettered. The delays are logged: what pausing a partition in place
// costs.
//
// The premise is that both partitions come in the first poll. On a loaded
// machine the client now and then hands them over in separate polls; the
// later one's records then wait for the first poll's commit, as the
// package doc says, and the scenario runs again on new topics, three times
// at most.
func TestAFailingRecordHoldsBackItsPartitionOnly(t *testing.T) {
	b := kafkatest.Start(t, 2)
	for try := 1; ; try++ {
		h := holdBack(t, b.Addr, fmt.Sprint("held-", try))
		if h.firstOther.After(h.bad) && try < 3 {
			t.Logf("the other partition came in a later poll than the failing record (its first record ran at %v, the dead letter at %v); again",
				h.firstOther.Sub(h.start), h.bad.Sub(h.start))
			continue
		}
		switch {
		case !h.lastOther.Before(h.bad):
			t.Errorf("the other partition's last record ran %v after the start, the failing one was dead-lettered at %v: it waited for it",
				h.lastOther.Sub(h.start), h.bad.Sub(h.start))
		case !h.afterBad.After(h.bad):
			t.Errorf("the record behind the failing one ran before it was dead-lettered")
		}
		t.Logf("the other partition's 20 records ran within %v; the failing record was dead-lettered after %v (two backoffs of 100 ms), the one behind it ran at %v",
			h.lastOther.Sub(h.start).Round(time.Millisecond), h.bad.Sub(h.start).Round(time.Millisecond), h.afterBad.Sub(h.start).Round(time.Millisecond))
		return
	}
}

// heldBack is when the records of holdBack ran.
type heldBack struct {
	start, firstOther, lastOther, bad, afterBad time.Time
}

// holdBack produces a failing record and one behind it to partition 0 of
// topic, 20 records to partition 1, and runs them with a consumer whose
// backoffs are 100 ms, until each is processed or dead-lettered.
func holdBack(t *testing.T, addr, topic string) heldBack {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.AllowAutoTopicCreation(), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	rs := []*kgo.Record{keyed("bad", "fails"), keyed("after-bad", "behind it")}
	for i := range 20 {
		rs = append(rs, keyed(fmt.Sprint("other-", i), "the other partition"))
	}
	for i, r := range rs {
		r.Partition = int32(min(i/2, 1)) // the first two in partition 0, the rest in 1
	}
	if err := cl.ProduceSync(context.Background(), rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	cl.Close()
	var mu sync.Mutex
	at := map[string]time.Time{}
	h := heldBack{start: time.Now()}
	rec := newRecorder()
	c, err := kafka.NewConsumer(consumerClient(t, addr, topic+"-group", topic), kafka.Options{Runner: memoryRunner(t), Logger: quietLog,
		Hooks: []kafka.Hook{rec, kafka.HookFunc(func(_ context.Context, e kafka.Event) {
			if e.Kind != queue.EventFailed {
				mu.Lock()
				at[e.Key] = time.Now()
				mu.Unlock()
			}
		})},
		MaxAttempts: 3, Backoff: queue.Backoff{Base: 100 * time.Millisecond, Max: 100 * time.Millisecond, Jitter: retryhttp.JitterNone}},
		func(ctx context.Context, r *kgo.Record) ([]byte, error) {
			if string(r.Key) == "bad" {
				return nil, errors.New("refused")
			}
			return nil, nil
		})
	if err != nil {
		t.Fatal(err)
	}
	run(t, c)
	rec.await(t, "every record settled", func() bool { return rec.count(queue.EventProcessed)+rec.count(queue.EventDead) == len(rs) })
	mu.Lock()
	defer mu.Unlock()
	for i := range 20 {
		ran := at[fmt.Sprint("other-", i)]
		h.lastOther = later(h.lastOther, ran)
		if h.firstOther.IsZero() || ran.Before(h.firstOther) {
			h.firstOther = ran
		}
	}
	h.bad, h.afterBad = at["bad"], at["after-bad"]
	return h
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

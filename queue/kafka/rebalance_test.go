package kafka_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/retryhttp/retryhttp/idempotency"
	"github.com/retryhttp/retryhttp/queue"
	"github.com/retryhttp/retryhttp/queue/kafka"
	"github.com/retryhttp/retryhttp/shared/kafkatest"
)

// A member whose record runs past the group's rebalance timeout is
// dropped from the group, and the partition's new owner reads the record
// again while it still runs: the new owner waits on the key's claim (a
// failed attempt that is not counted, so it is not dead-lettered however
// long it waits), and once the first run has stored its result the
// record is a duplicate. The record's effect happens once, and the next
// record runs.
func TestRecordOutlastingTheRebalanceTimeout(t *testing.T) {
	b := kafkatest.Start(t, 1)
	const topic, group = "slow", "slow-group"
	produce(t, b.Addr, topic, keyed("slow-order", "takes long"))
	runner, err := idempotency.NewRunner(idempotency.RunnerOptions{Kind: "test", Logger: quietLog, LockTimeout: time.Minute,
		MaxWait: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	var effects atomic.Int64
	running, release := make(chan struct{}), make(chan struct{})
	slow := func(ctx context.Context, r *kgo.Record) ([]byte, error) {
		effects.Add(1)
		if string(r.Key) == "slow-order" {
			close(running)
			<-release
		}
		return []byte("done"), nil
	}
	fast := func(ctx context.Context, r *kgo.Record) ([]byte, error) {
		effects.Add(1)
		return []byte("done"), nil
	}
	timeouts := []kgo.Opt{kgo.RebalanceTimeout(time.Second), kgo.SessionTimeout(6 * time.Second), kgo.HeartbeatInterval(100 * time.Millisecond)}
	opts := kafka.Options{Runner: runner, Logger: quietLog, MaxAttempts: 2, Backoff: queue.Backoff{Base: time.Millisecond, Max: 10 * time.Millisecond}}

	firstRec := newRecorder()
	firstOpts := opts
	firstOpts.Hooks = []kafka.Hook{firstRec}
	first, err := kafka.NewConsumer(consumerClient(t, b.Addr, group, topic, timeouts...), firstOpts, slow)
	if err != nil {
		t.Fatal(err)
	}
	run(t, first)
	<-running

	rec := newRecorder()
	opts.Hooks = []kafka.Hook{rec}
	second, err := kafka.NewConsumer(consumerClient(t, b.Addr, group, topic, timeouts...), opts, fast)
	if err != nil {
		t.Fatal(err)
	}
	run(t, second)
	inFlight := func() bool {
		n := rec.Count(func(e kafka.Event) bool {
			return e.Kind == queue.EventFailed && errors.Is(e.Err, idempotency.ErrInFlight)
		})
		return n > opts.MaxAttempts // waited past MaxAttempts without being dead-lettered
	}
	rec.await(t, "the new owner reading the record while its first run goes on", inFlight)
	close(release)
	rec.await(t, "the record replayed on the new owner", func() bool { return rec.count(queue.EventDuplicate) == 1 })
	produce(t, b.Addr, topic, keyed("next-order", "after it"))
	// The first member, its record done, may join the group again and
	// take the partition back: the next record runs on either.
	rec.await(t, "the next record run", func() bool { return effects.Load() == 2 })
	firstRec.await(t, "the first run's result stored", func() bool { return firstRec.count(queue.EventProcessed) >= 1 })
	if n := effects.Load(); n != 2 {
		t.Errorf("%d effects for two records, want 2: the slow one ran twice", n)
	}
	if n := rec.count(queue.EventDead); n != 0 {
		t.Errorf("%d records dead-lettered while waiting on a claim, want 0", n)
	}
}

package kafka_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/retryhttp/retryhttp/queue/kafka"
	"github.com/retryhttp/retryhttp/shared/kafkatest"
)

// BenchmarkConsume: 5,000 records in 4 partitions of a kfake broker,
// consumed as a group until every one has run and its offset is
// committed, through a Consumer (a Runner on the memory store: the
// wrapper's own cost, not a shared store's) and bare (the same handler,
// polled and committed by hand after each poll); records per second. Run
// it with -benchtime=1x.
func BenchmarkConsume(b *testing.B) {
	const n = 5000
	work := func(context.Context, *kgo.Record) ([]byte, error) { return nil, nil }
	for _, wrapped := range []bool{false, true} {
		name := "bare"
		if wrapped {
			name = "Consumer"
		}
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				br := kafkatest.Start(b, 4)
				var rs []*kgo.Record
				for i := range n {
					rs = append(rs, keyed(fmt.Sprint("order-", i), "placed"))
				}
				produce(b, br.Addr, "orders", rs...)
				cl := consumerClient(b, br.Addr, "bench", "orders")
				ctx, cancel := context.WithCancel(context.Background())
				seen := make(chan struct{}, n)
				start := time.Now()
				done := make(chan struct{})
				if wrapped {
					c, err := kafka.NewConsumer(cl, kafka.Options{Runner: memoryRunner(b), Logger: quietLog,
						Hooks: []kafka.Hook{kafka.HookFunc(func(context.Context, kafka.Event) { seen <- struct{}{} })}}, work)
					if err != nil {
						b.Fatal(err)
					}
					go func() { defer close(done); c.Run(ctx) }()
				} else {
					go func() {
						defer close(done)
						for ctx.Err() == nil {
							fs := cl.PollRecords(ctx, kafka.DefaultMaxPollRecords)
							fs.EachRecord(func(r *kgo.Record) { work(ctx, r); seen <- struct{}{} })
							cl.CommitUncommittedOffsets(ctx)
							cl.AllowRebalance()
						}
					}()
				}
				for range n {
					<-seen
				}
				b.ReportMetric(n/time.Since(start).Seconds(), "records/s")
				cancel()
				<-done
			}
		})
	}
}

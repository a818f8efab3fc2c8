package rabbitmq_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/retryhttp/retryhttp/idempotency"
	"github.com/retryhttp/retryhttp/queue/rabbitmq"
)

// BenchmarkConsume: 5,000 messages in a queue, consumed (prefetch 256,
// each delivery on a goroutine of its own) until each is acknowledged,
// through Handler (a Runner on the memory store: the wrapper's own cost,
// not a shared store's) and bare (the same handler, acked by hand);
// messages per second. Run it with -benchtime=1x.
func BenchmarkConsume(b *testing.B) {
	const n = 5000
	work := func(context.Context, amqp.Delivery) ([]byte, error) { return nil, nil }
	for _, wrapped := range []bool{false, true} {
		name := "bare"
		if wrapped {
			name = "Handler"
		}
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				conn := dial(b)
				q := testQueue(b, conn)
				ch, err := conn.Channel()
				if err != nil {
					b.Fatal(err)
				}
				ctx := context.Background()
				for i := range n {
					if err := ch.PublishWithContext(ctx, "", q, false, false, amqp.Publishing{MessageId: fmt.Sprint("msg-", i)}); err != nil {
						b.Fatal(err)
					}
				}
				handle := func(ctx context.Context, d amqp.Delivery) { work(ctx, d); d.Ack(false) }
				if wrapped {
					runner, err := idempotency.NewRunner(idempotency.RunnerOptions{Logger: slog.New(slog.DiscardHandler)})
					if err != nil {
						b.Fatal(err)
					}
					if handle, err = rabbitmq.Handler(rabbitmq.Options{Runner: runner}, work); err != nil {
						b.Fatal(err)
					}
				}
				ch.Qos(256, 0, false)
				start := time.Now()
				ds, err := ch.Consume(q, "", false, false, false, false, nil)
				if err != nil {
					b.Fatal(err)
				}
				var wg sync.WaitGroup
				for range n {
					d := <-ds
					wg.Go(func() { handle(ctx, d) })
				}
				wg.Wait()
				b.ReportMetric(n/time.Since(start).Seconds(), "msgs/s")
				ch.Close()
			}
		})
	}
}

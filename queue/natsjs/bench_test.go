package natsjs_test

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/retryhttp/retryhttp/idempotency"
	"github.com/retryhttp/retryhttp/queue/natsjs"
	"github.com/retryhttp/retryhttp/shared/natstest"
)

// BenchmarkConsume: 5,000 messages in a stream, consumed until each is
// acknowledged, through Handler (a Runner on the memory store: the
// wrapper's own cost, not a shared store's) and bare (the same handler,
// acked by hand); messages per second. Run it with -benchtime=1x.
func BenchmarkConsume(b *testing.B) {
	const n = 5000
	work := func(context.Context, jetstream.Msg) ([]byte, error) { return nil, nil }
	for _, wrapped := range []bool{false, true} {
		name := "bare"
		if wrapped {
			name = "Handler"
		}
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				js := natstest.JetStream(b)
				subject, cons := stream(b, js, 30*time.Second)
				ctx := context.Background()
				for i := range n {
					m := nats.NewMsg(subject)
					m.Header.Set(jetstream.MsgIDHeader, fmt.Sprint("msg-", i))
					if _, err := js.PublishMsgAsync(m); err != nil {
						b.Fatal(err)
					}
				}
				<-js.PublishAsyncComplete()
				done := make(chan struct{}, n)
				var h jetstream.MessageHandler = func(m jetstream.Msg) {
					work(ctx, m)
					m.Ack()
					done <- struct{}{}
				}
				if wrapped {
					runner, err := idempotency.NewRunner(idempotency.RunnerOptions{Logger: slog.New(slog.DiscardHandler)})
					if err != nil {
						b.Fatal(err)
					}
					inner, err := natsjs.Handler(natsjs.Options{Runner: runner}, work)
					if err != nil {
						b.Fatal(err)
					}
					h = func(m jetstream.Msg) { inner(m); done <- struct{}{} }
				}
				start := time.Now()
				cc, err := cons.Consume(h)
				if err != nil {
					b.Fatal(err)
				}
				for range n {
					<-done
				}
				b.ReportMetric(n/time.Since(start).Seconds(), "msgs/s")
				cc.Stop()
			}
		})
	}
}

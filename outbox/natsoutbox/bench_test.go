package natsoutbox_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/retryhttp/retryhttp/outbox"
	"github.com/retryhttp/retryhttp/outbox/internal/outboxtest"
	"github.com/retryhttp/retryhttp/outbox/natsoutbox"
	"github.com/retryhttp/retryhttp/shared/natstest"
)

// BenchmarkRelay drains a backlog of 5,000 messages committed while no
// relay ran into a JetStream stream, with 1 and 4 relays, and reports the
// messages per second; "bare" publishes as many with the client alone
// (Nats-Msg-Id set, each ack awaited, 32 at once, as a relay's batch
// does): the broker's floor. Run it with -benchtime=1x.
func BenchmarkRelay(b *testing.B) {
	const n = 5000
	for _, relays := range []int{1, 4} {
		b.Run(fmt.Sprintf("relays=%d", relays), func(b *testing.B) {
			for b.Loop() {
				drain(b, relays, n)
			}
		})
	}
	b.Run("bare", func(b *testing.B) {
		for b.Loop() {
			js := natstest.JetStream(b)
			subject, s := stream(b, js, time.Minute)
			start := time.Now()
			var wg sync.WaitGroup
			for w := range 32 {
				wg.Go(func() {
					for i := w; i < n; i += 32 {
						m := nats.NewMsg(subject)
						m.Data = []byte(`{"kind":"order.paid"}`)
						m.Header.Set(jetstream.MsgIDHeader, uuid.NewString())
						if _, err := js.PublishMsg(context.Background(), m); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			b.ReportMetric(n/time.Since(start).Seconds(), "msgs/s")
			if info, _ := s.Info(context.Background()); info.State.Msgs != n {
				b.Fatalf("%d in the stream, want %d", info.State.Msgs, n)
			}
		}
	})
}

func drain(b *testing.B, relays, n int) {
	js := natstest.JetStream(b)
	p := outboxtest.Pool(b)
	o := outboxtest.New(b, p)
	subject, s := stream(b, js, time.Minute)
	sender, _ := natsoutbox.New(js)
	drained := func() bool {
		info, err := s.Info(context.Background())
		return err == nil && info.State.Msgs == uint64(n)
	}
	b.ReportMetric(outboxtest.Drain(b, p, o, natsoutbox.URL(subject), n, relays, map[string]outbox.Sender{natsoutbox.Scheme: sender}, drained), "msgs/s")
}

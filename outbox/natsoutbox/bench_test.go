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
	"github.com/retryhttp/retryhttp/outbox/natsoutbox"
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
			js := connect(b)
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
	js := connect(b)
	p := db(b)
	o := newOutbox(b, p, "")
	subject, s := stream(b, js, time.Minute)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, err := p.Exec(ctx, `INSERT INTO `+o.Table()+` (id, method, url, body)
SELECT gen_random_uuid()::text, 'POST', $1, '{"kind":"order.paid"}'::bytea FROM generate_series(1, $2)`, natsoutbox.URL(subject), n); err != nil {
		b.Fatal(err)
	}
	sender, _ := natsoutbox.New(js)
	start := time.Now()
	var wg sync.WaitGroup
	for range relays {
		r, err := outbox.NewRelay(outbox.RelayOptions{Outbox: o, Logger: quiet, Senders: map[string]outbox.Sender{natsoutbox.Scheme: sender}})
		if err != nil {
			b.Fatal(err)
		}
		wg.Go(func() { r.Run(ctx) })
	}
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(2 * time.Millisecond) {
		if info, err := s.Info(ctx); err == nil && info.State.Msgs == uint64(n) {
			break
		}
		if time.Now().After(deadline) {
			b.Fatal("backlog not drained")
		}
	}
	b.ReportMetric(float64(n)/time.Since(start).Seconds(), "msgs/s")
	cancel()
	wg.Wait()
}

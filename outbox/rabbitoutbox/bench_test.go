package rabbitoutbox_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/retryhttp/retryhttp/outbox"
	"github.com/retryhttp/retryhttp/outbox/internal/outboxtest"
	"github.com/retryhttp/retryhttp/outbox/rabbitoutbox"
)

// BenchmarkRelay drains a backlog of 5,000 messages committed while no
// relay ran into a RabbitMQ queue, with 1 and 4 relays, and reports the
// messages per second; "bare" publishes as many with the client alone
// (persistent, mandatory, each confirmation awaited, 32 at once on
// channels of their own, as a relay's batch does): the broker's floor. Run
// it with -benchtime=1x.
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
			d := dial(b, "")
			conn, q := testQueue(b, d)
			start := time.Now()
			var wg sync.WaitGroup
			for w := range 32 {
				wg.Go(func() {
					ch, err := conn.Channel()
					if err != nil {
						b.Error(err)
						return
					}
					defer ch.Close()
					ch.Confirm(false)
					for i := w; i < n; i += 32 {
						dc, err := ch.PublishWithDeferredConfirmWithContext(context.Background(), "", q, true, false,
							amqp.Publishing{MessageId: uuid.NewString(), DeliveryMode: amqp.Persistent, Body: []byte(`{"kind":"order.paid"}`)})
						if err == nil {
							_, err = dc.WaitContext(context.Background())
						}
						if err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			b.ReportMetric(n/time.Since(start).Seconds(), "msgs/s")
			if got := depth(b, conn, q); got != n {
				b.Fatalf("%d in the queue, want %d", got, n)
			}
		}
	})
}

func depth(b *testing.B, conn *amqp.Connection, q string) int {
	ch, err := conn.Channel()
	if err != nil {
		b.Fatal(err)
	}
	defer ch.Close()
	st, err := ch.QueueDeclarePassive(q, false, false, false, false, nil)
	if err != nil {
		b.Fatal(err)
	}
	return st.Messages
}

func drain(b *testing.B, relays, n int) {
	d := dial(b, "")
	p := outboxtest.Pool(b)
	o := outboxtest.New(b, p)
	conn, q := testQueue(b, d)
	drained := func() bool { return depth(b, conn, q) >= n }
	b.ReportMetric(outboxtest.Drain(b, p, o, rabbitoutbox.URL("", q), n, relays, map[string]outbox.Sender{rabbitoutbox.Scheme: newSender(b, d)}, drained), "msgs/s")
}

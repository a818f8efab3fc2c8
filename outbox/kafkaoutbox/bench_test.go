package kafkaoutbox_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/retryhttp/retryhttp/outbox"
	"github.com/retryhttp/retryhttp/outbox/internal/outboxtest"
	"github.com/retryhttp/retryhttp/outbox/kafkaoutbox"
	"github.com/retryhttp/retryhttp/shared/kafkatest"
)

// BenchmarkRelay drains a backlog of 5,000 messages committed while no
// relay ran into a topic of a kfake broker, with 1 and 4 relays, and
// reports the messages per second; "bare" produces as many with the
// client alone (idempotent, each acknowledgement awaited, 32 at once, as
// a relay's batch does): the broker's floor. Run it with -benchtime=1x.
func BenchmarkRelay(b *testing.B) {
	const n = 5000
	for _, relays := range []int{1, 4} {
		b.Run(fmt.Sprintf("relays=%d", relays), func(b *testing.B) {
			for b.Loop() {
				br := kafkatest.Start(b, 4)
				p := outboxtest.Pool(b)
				o := outboxtest.New(b, p)
				topic := "orders-" + uuid.NewString()[:8]
				count := countingClient(b, br.Addr, topic)
				drained := func() bool { return count() >= n }
				b.ReportMetric(outboxtest.Drain(b, p, o, kafkaoutbox.URL(topic, ""), n, relays,
					map[string]outbox.Sender{kafkaoutbox.Scheme: newSender(b, br.Addr)}, drained), "msgs/s")
			}
		})
	}
	b.Run("bare", func(b *testing.B) {
		for b.Loop() {
			br := kafkatest.Start(b, 4)
			cl, err := kgo.NewClient(kgo.SeedBrokers(br.Addr), kgo.AllowAutoTopicCreation(), kgo.DefaultProduceTopic("orders"))
			if err != nil {
				b.Fatal(err)
			}
			start := time.Now()
			var wg sync.WaitGroup
			for w := range 32 {
				wg.Go(func() {
					for i := w; i < n; i += 32 {
						if err := cl.ProduceSync(context.Background(), &kgo.Record{Key: []byte(uuid.NewString()), Value: []byte(`{"kind":"order.paid"}`)}).FirstErr(); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			b.ReportMetric(n/time.Since(start).Seconds(), "msgs/s")
			cl.Close()
		}
	})
}

// countingClient returns a function reporting how many records topic
// holds, read by a client kept for the benchmark.
func countingClient(b *testing.B, addr, topic string) func() int {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.AllowAutoTopicCreation())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(cl.Close)
	n := 0
	return func() int {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Millisecond)
		defer cancel()
		n += cl.PollFetches(ctx).NumRecords()
		return n
	}
}

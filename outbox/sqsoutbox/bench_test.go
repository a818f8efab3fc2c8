package sqsoutbox_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/google/uuid"

	"github.com/retryhttp/retryhttp/outbox"
	"github.com/retryhttp/retryhttp/outbox/internal/outboxtest"
	"github.com/retryhttp/retryhttp/outbox/sqsoutbox"
	"github.com/retryhttp/retryhttp/shared/sqstest"
)

// BenchmarkRelay drains a backlog of 2,000 messages committed while no
// relay ran into a fauxqs queue, with 1 and 4 relays, and reports the
// messages per second; "bare" sends as many with the client alone, 32 at
// once (as a relay's batch does): the emulator's floor. Run it with
// -benchtime=1x.
func BenchmarkRelay(b *testing.B) {
	const n = 2000
	s := sqstest.Start(b)
	cl := client(s)
	queued := func(queueURL string) int {
		out, err := cl.GetQueueAttributes(context.Background(), &awssqs.GetQueueAttributesInput{QueueUrl: aws.String(queueURL),
			AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameApproximateNumberOfMessages}})
		if err != nil {
			b.Fatal(err)
		}
		var k int
		fmt.Sscan(out.Attributes[string(types.QueueAttributeNameApproximateNumberOfMessages)], &k)
		return k
	}
	for _, relays := range []int{1, 4} {
		b.Run(fmt.Sprintf("relays=%d", relays), func(b *testing.B) {
			for b.Loop() {
				p := outboxtest.Pool(b)
				o := outboxtest.New(b, p)
				queueURL := createQueue(b, cl, "bench-"+uuid.NewString()[:8], nil)
				sender, err := sqsoutbox.New(cl)
				if err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(outboxtest.Drain(b, p, o, sqsoutbox.URL(queueURL, ""), n, relays,
					map[string]outbox.Sender{sqsoutbox.Scheme: sender}, func() bool { return queued(queueURL) >= n }), "msgs/s")
			}
		})
	}
	b.Run("bare", func(b *testing.B) {
		for b.Loop() {
			queueURL := createQueue(b, cl, "bench-"+uuid.NewString()[:8], nil)
			start := time.Now()
			var wg sync.WaitGroup
			for w := range 32 {
				wg.Go(func() {
					for i := w; i < n; i += 32 {
						if _, err := cl.SendMessage(context.Background(), &awssqs.SendMessageInput{QueueUrl: aws.String(queueURL),
							MessageBody: aws.String(`{"kind":"order.paid"}`)}); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			b.ReportMetric(n/time.Since(start).Seconds(), "msgs/s")
		}
	})
}

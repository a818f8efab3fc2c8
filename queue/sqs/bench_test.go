package sqs_test

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

	"github.com/retryhttp/retryhttp/queue/sqs"
	"github.com/retryhttp/retryhttp/shared/sqstest"
)

// BenchmarkConsume: 2,000 messages in a fauxqs queue, received (10 at
// once) and deleted once run, through a Consumer (Concurrency 10, a
// Runner on the memory store: the wrapper's own cost, not a shared
// store's) and bare (the same handler, 10 receivers receiving and
// deleting by hand); messages per second. Run it with -benchtime=1x.
func BenchmarkConsume(b *testing.B) {
	const n = 2000
	work := func(context.Context, types.Message) ([]byte, error) { return nil, nil }
	s := sqstest.Start(b)
	cl := client(s)
	for _, wrapped := range []bool{false, true} {
		name := "bare"
		if wrapped {
			name = "Consumer"
		}
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				queueURL := createQueue(b, cl, "bench-"+uuid.NewString()[:8], nil)
				for i := 0; i < n; i += 10 {
					var entries []types.SendMessageBatchRequestEntry
					for j := range 10 {
						entries = append(entries, types.SendMessageBatchRequestEntry{Id: aws.String(fmt.Sprint(j)), MessageBody: aws.String(fmt.Sprint("order-", i+j)),
							MessageAttributes: map[string]types.MessageAttributeValue{sqs.KeyAttribute: {DataType: aws.String("String"), StringValue: aws.String(fmt.Sprint("order-", i+j))}}})
					}
					if _, err := cl.SendMessageBatch(context.Background(), &awssqs.SendMessageBatchInput{QueueUrl: aws.String(queueURL), Entries: entries}); err != nil {
						b.Fatal(err)
					}
				}
				ctx, cancel := context.WithCancel(context.Background())
				seen := make(chan struct{}, n)
				var wg sync.WaitGroup
				start := time.Now()
				if wrapped {
					c, err := sqs.NewConsumer(cl, sqs.Options{Runner: memoryRunner(b), QueueURL: queueURL, Logger: quietLog, WaitTime: time.Second,
						Hooks: []sqs.Hook{sqs.HookFunc(func(context.Context, sqs.Event) { seen <- struct{}{} })}}, work)
					if err != nil {
						b.Fatal(err)
					}
					wg.Go(func() { c.Run(ctx) })
				} else {
					for range 10 {
						wg.Go(func() {
							for ctx.Err() == nil {
								out, err := cl.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{QueueUrl: aws.String(queueURL), MaxNumberOfMessages: 10,
									WaitTimeSeconds: 1, MessageAttributeNames: []string{"All"}})
								if err != nil {
									continue
								}
								for _, m := range out.Messages {
									work(ctx, m)
									cl.DeleteMessage(ctx, &awssqs.DeleteMessageInput{QueueUrl: aws.String(queueURL), ReceiptHandle: m.ReceiptHandle})
									seen <- struct{}{}
								}
							}
						})
					}
				}
				for range n {
					<-seen
				}
				b.ReportMetric(n/time.Since(start).Seconds(), "msgs/s")
				cancel()
				wg.Wait()
			}
		})
	}
}

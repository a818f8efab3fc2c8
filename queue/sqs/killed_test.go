package sqs_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/redis/go-redis/v9"

	"github.com/retryhttp/retryhttp/idempotency"
	"github.com/retryhttp/retryhttp/idempotency/redisstore"
	"github.com/retryhttp/retryhttp/queue"
	"github.com/retryhttp/retryhttp/queue/sqs"
	"github.com/retryhttp/retryhttp/shared/shiptest"
	"github.com/retryhttp/retryhttp/shared/sqstest"
	"github.com/retryhttp/retryhttp/shared/testenv"
)

// What the consumer process of TestConsumersKilled is told.
const (
	childQueue    = "SQS_TEST_CHILD_QUEUE"
	childEndpoint = "SQS_TEST_CHILD_ENDPOINT"
	childPrefix   = "SQS_TEST_CHILD_PREFIX"
	childShipping = "SQS_TEST_CHILD_SHIPPING"
)

// The consumer process of TestConsumersKilled, run by the test binary
// with the child variables set: it receives from the queue, runs each
// message once per order through a Runner on Redis (shared by every
// consumer process), and ships the order with a key derived from it,
// until it is killed. The poison order's handler panics, always.
func TestChildConsumer(t *testing.T) {
	queueURL := os.Getenv(childQueue)
	if queueURL == "" {
		t.Skip("run by TestConsumersKilled")
	}
	store, err := redisstore.New(redis.NewClient(&redis.Options{Addr: testenv.RedisAddr()}), redisstore.Options{Prefix: os.Getenv(childPrefix), Logger: quietLog})
	if err != nil {
		t.Fatal(err)
	}
	runner, err := idempotency.NewRunner(idempotency.RunnerOptions{Store: store, Kind: "shipping", LockTimeout: 2 * time.Second,
		MaxWait: 200 * time.Millisecond, Retention: time.Minute, Logger: quietLog}) // the test's keys leave the shared Redis soon after
	if err != nil {
		t.Fatal(err)
	}
	shipper := shiptest.NewShipper(os.Getenv(childShipping))
	c, err := sqs.NewConsumer(client0(os.Getenv(childEndpoint)), sqs.Options{Runner: runner, QueueURL: queueURL, Logger: quietLog,
		Key:               func(m types.Message) (string, error) { return aws.ToString(m.Body), nil }, // the order, whichever message carries it
		VisibilityTimeout: time.Second, WaitTime: time.Second, Concurrency: 4, MaxAttempts: 3,
		Backoff: queue.Backoff{Base: time.Millisecond, Max: time.Millisecond},
	}, func(ctx context.Context, m types.Message) ([]byte, error) {
		if aws.ToString(m.Body) == "poison" {
			panic("the poison order")
		}
		return nil, shipper.Ship(ctx, aws.ToString(m.Body)) // the key derived from the order: the same on every run
	})
	if err != nil {
		t.Fatal(err)
	}
	c.Run(context.Background())
}

// client0 is an SQS client of the endpoint.
func client0(endpoint string) *awssqs.Client { return client(&sqstest.Server{URL: endpoint}) }

// 1,000 orders on a queue of a fauxqs of the test's own, 100 of them sent
// twice as two messages (a producer that sent again) and one poison
// order whose handler always panics, consumed by processes of the test's
// own that are SIGKILLed every 250 to 400 ms and started again: what a
// killed consumer held is received again once its visibility timeout (1
// s) passes, by a consumer that meets the key's claim or its stored
// result. The consumers share a Runner on Redis and ship with keys
// derived from the order through a Transport to a shipping service behind
// the idempotency middleware: each order ships exactly once, the poison
// order ends in the dead-letter queue after its MaxAttempts, and the
// queue ends empty.
func TestConsumersKilled(t *testing.T) {
	if raceEnabled {
		t.Skip("many processes for seconds: CI runs it without the race detector")
	}
	if os.Getenv(childQueue) != "" {
		t.Skip("in the child")
	}
	if err := redis.NewClient(&redis.Options{Addr: testenv.RedisAddr()}).Ping(context.Background()).Err(); err != nil {
		testenv.Unreachable(t, "Redis", testenv.RedisAddr(), err)
	}
	s := sqstest.Start(t)
	cl := client(s)
	name := fmt.Sprintf("orders-%d", time.Now().UnixNano())
	dlq := createQueue(t, cl, name+"-dlq", nil)
	queueURL := createQueue(t, cl, name, map[string]string{"RedrivePolicy": fmt.Sprintf(`{"deadLetterTargetArn":%q,"maxReceiveCount":"50"}`, arn(t, cl, dlq))})
	shipping := shiptest.Start(t, 5*time.Millisecond)
	const orders = 1000
	var batch []types.SendMessageBatchRequestEntry
	flush := func() {
		if len(batch) == 0 {
			return
		}
		if _, err := cl.SendMessageBatch(context.Background(), &awssqs.SendMessageBatchInput{QueueUrl: aws.String(queueURL), Entries: batch}); err != nil {
			t.Fatal(err)
		}
		batch = batch[:0]
	}
	for i := range orders + 1 {
		body := fmt.Sprint("order-", i)
		if i == orders {
			body = "poison"
		}
		copies := 1
		if i%10 == 0 {
			copies = 2
		}
		for copy := range copies {
			batch = append(batch, types.SendMessageBatchRequestEntry{Id: aws.String(fmt.Sprint("m", i, "-", copy)), MessageBody: aws.String(body)})
			if len(batch) == 10 {
				flush()
			}
		}
	}
	flush()
	done := shipping.Orders
	// The poison order may be in the dead-letter queue twice: a consumer
	// killed between its send there and its delete leaves it in both.
	finished := func() bool { return done() == orders && depth(t, cl, queueURL) == 0 && depth(t, cl, dlq) >= 1 }
	prefix := "retryhttp-test-sqs-killed:" + name + ":"
	kills := shipping.Kills(t, orders, 250*time.Millisecond, func() *exec.Cmd {
		child := exec.Command(os.Args[0], "-test.run=^TestChildConsumer$")
		child.Env = append(os.Environ(), childQueue+"="+queueURL, childEndpoint+"="+s.URL, childPrefix+"="+prefix, childShipping+"="+shipping.URL)
		child.Stdout, child.Stderr = io.Discard, os.Stderr
		return child
	}, finished, nil)
	if kills == 0 {
		t.Error("no consumer was killed")
	}
	out, err := cl.ReceiveMessage(context.Background(), &awssqs.ReceiveMessageInput{QueueUrl: aws.String(dlq), MaxNumberOfMessages: 10})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range out.Messages {
		if aws.ToString(m.Body) != "poison" {
			t.Errorf("%s is in the dead-letter queue: only the poison order should be", aws.ToString(m.Body))
		}
	}
	requests := shipping.Check(t, orders)
	t.Logf("%d orders (%d messages) shipped once each in %d requests across %d consumers killed with SIGKILL; the poison order dead-lettered",
		orders, orders+orders/10+1, requests, kills)
}

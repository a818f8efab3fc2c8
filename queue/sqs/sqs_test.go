package sqs_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/google/uuid"
	"go.uber.org/goleak"

	"github.com/retryhttp/retryhttp/idempotency"
	"github.com/retryhttp/retryhttp/queue"
	"github.com/retryhttp/retryhttp/queue/sqs"
	"github.com/retryhttp/retryhttp/shared/sqstest"
	"github.com/retryhttp/retryhttp/shared/testenv"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var quietLog = slog.New(slog.DiscardHandler)

// client is an SQS client of s.
func client(s *sqstest.Server) *awssqs.Client {
	return awssqs.New(awssqs.Options{Region: "us-east-1", BaseEndpoint: aws.String(s.URL),
		Credentials: credentials.NewStaticCredentialsProvider("test", "test", "")})
}

// createQueue creates a queue of the test's own with attrs and returns
// its URL.
func createQueue(t testing.TB, cl *awssqs.Client, name string, attrs map[string]string) string {
	t.Helper()
	out, err := cl.CreateQueue(context.Background(), &awssqs.CreateQueueInput{QueueName: aws.String(name), Attributes: attrs})
	if err != nil {
		t.Fatal(err)
	}
	return aws.ToString(out.QueueUrl)
}

func arn(t testing.TB, cl *awssqs.Client, url string) string {
	t.Helper()
	out, err := cl.GetQueueAttributes(context.Background(), &awssqs.GetQueueAttributesInput{QueueUrl: aws.String(url),
		AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameQueueArn}})
	if err != nil {
		t.Fatal(err)
	}
	return out.Attributes[string(types.QueueAttributeNameQueueArn)]
}

// send sends a message with key as its KeyAttribute ("" for none).
func send(t testing.TB, cl *awssqs.Client, url, key, body string, fifo ...string) {
	t.Helper()
	in := &awssqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String(body)}
	if key != "" {
		in.MessageAttributes = map[string]types.MessageAttributeValue{sqs.KeyAttribute: {DataType: aws.String("String"), StringValue: aws.String(key)}}
	}
	if len(fifo) == 2 { // group, deduplication ID
		in.MessageGroupId, in.MessageDeduplicationId = aws.String(fifo[0]), aws.String(fifo[1])
	}
	if _, err := cl.SendMessage(context.Background(), in); err != nil {
		t.Fatal(err)
	}
}

// depth is the messages in the queue, visible or not.
func depth(t testing.TB, cl *awssqs.Client, url string) int {
	t.Helper()
	out, err := cl.GetQueueAttributes(context.Background(), &awssqs.GetQueueAttributesInput{QueueUrl: aws.String(url),
		AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameApproximateNumberOfMessages, types.QueueAttributeNameApproximateNumberOfMessagesNotVisible}})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, v := range out.Attributes {
		var k int
		fmt.Sscan(v, &k)
		n += k
	}
	return n
}

// recorder keeps a consumer's events.
type recorder struct{ testenv.Recorder[sqs.Event] }

// count is how many events of kind have come.
func (r *recorder) count(kind queue.EventKind) int {
	return r.Count(func(e sqs.Event) bool { return e.Kind == kind })
}

func memoryRunner(t testing.TB) *idempotency.Runner {
	t.Helper()
	r, err := idempotency.NewRunner(idempotency.RunnerOptions{Kind: "test", Logger: quietLog, LockTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// run runs c until the test ends.
func run(t testing.TB, c *sqs.Consumer) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
}

func TestNewConsumerRefusesWhatCannotWork(t *testing.T) {
	cl := client(&sqstest.Server{URL: "http://127.0.0.1:1"})
	r := memoryRunner(t)
	h := func(context.Context, types.Message) ([]byte, error) { return nil, nil }
	ok := sqs.Options{Runner: r, QueueURL: "http://127.0.0.1:1/000000000000/q"}
	with := func(f func(*sqs.Options)) sqs.Options { o := ok; f(&o); return o }
	for name, tc := range map[string]struct {
		cl *awssqs.Client
		o  sqs.Options
		h  sqs.Handler
	}{
		"nil client":           {nil, ok, h},
		"nil Runner":           {cl, with(func(o *sqs.Options) { o.Runner = nil }), h},
		"no queue":             {cl, with(func(o *sqs.Options) { o.QueueURL = "" }), h},
		"nil handler":          {cl, ok, nil},
		"negative MaxAttempts": {cl, with(func(o *sqs.Options) { o.MaxAttempts = -1 }), h},
		"negative Concurrency": {cl, with(func(o *sqs.Options) { o.Concurrency = -1 }), h},
		"visibility 1.5 s":     {cl, with(func(o *sqs.Options) { o.VisibilityTimeout = 1500 * time.Millisecond }), h},
		"wait 21 s":            {cl, with(func(o *sqs.Options) { o.WaitTime = 21 * time.Second }), h},
		"bad Backoff":          {cl, with(func(o *sqs.Options) { o.Backoff = queue.Backoff{Base: -1} }), h},
	} {
		if c, err := sqs.NewConsumer(tc.cl, tc.o, tc.h); err == nil || c != nil {
			t.Errorf("%s: NewConsumer returned %v, %v; want an error", name, c, err)
		}
	}
	// A queue that does not exist is Run's error, not a silent idle loop.
	s := sqstest.Start(t)
	c, err := sqs.NewConsumer(client(s), sqs.Options{Runner: r, QueueURL: s.URL + "/000000000000/missing", WaitTime: time.Second}, h)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Run(context.Background()); err == nil {
		t.Error("Run on a queue that does not exist returned nil")
	}
}

// Messages run once per key: ten keys sent twice run once, their second
// messages duplicates; copies of ten messages sent again once the first
// were deleted (what a standard queue's second delivery of a message
// is, and fauxqs does not do) are duplicates too. Every message is
// deleted once its outcome is stored.
func TestEachKeyRunsOnceAndIsDeleted(t *testing.T) {
	s := sqstest.Start(t)
	cl := client(s)
	url := createQueue(t, cl, "orders-"+uuid.NewString()[:8], nil)
	for i := range 30 {
		send(t, cl, url, fmt.Sprint("order-", i%20), fmt.Sprint("event ", i))
	}
	var mu sync.Mutex
	ran := map[string]int{}
	rec := &recorder{}
	c, err := sqs.NewConsumer(cl, sqs.Options{Runner: memoryRunner(t), QueueURL: url, Logger: quietLog, Hooks: []sqs.Hook{rec}, WaitTime: time.Second},
		func(ctx context.Context, m types.Message) ([]byte, error) {
			key := *m.MessageAttributes[sqs.KeyAttribute].StringValue
			mu.Lock()
			ran[key]++
			mu.Unlock()
			return []byte("shipped"), nil
		})
	if err != nil {
		t.Fatal(err)
	}
	run(t, c)
	testenv.Eventually(t, "30 messages run or replayed", func() bool { return rec.count(queue.EventProcessed)+rec.count(queue.EventDuplicate) == 30 })
	for i := range 10 { // delivered again
		send(t, cl, url, fmt.Sprint("order-", i), fmt.Sprint("event ", i))
	}
	testenv.Eventually(t, "the 10 copies replayed", func() bool { return rec.count(queue.EventDuplicate) == 20 })
	testenv.Eventually(t, "the queue empty", func() bool { return depth(t, cl, url) == 0 })
	mu.Lock()
	defer mu.Unlock()
	for key, n := range ran {
		if n != 1 {
			t.Errorf("%s ran %d times, want 1", key, n)
		}
	}
	if len(ran) != 20 || rec.count(queue.EventProcessed) != 20 {
		t.Errorf("%d keys ran, %d processed; want 20 and 20", len(ran), rec.count(queue.EventProcessed))
	}
}

// On a FIFO queue a second send of one deduplication ID is dropped by
// the queue, an event sent again under another ID is a duplicate, and
// the messages of a group run in the order they were sent.
func TestFIFO(t *testing.T) {
	s := sqstest.Start(t)
	cl := client(s)
	url := createQueue(t, cl, "orders-"+uuid.NewString()[:8]+".fifo", map[string]string{"FifoQueue": "true"})
	for step := range 5 {
		for _, order := range []string{"a", "b", "c"} {
			key := fmt.Sprintf("%s-step-%d", order, step)
			send(t, cl, url, key, key, order, "msg-"+key)
			send(t, cl, url, key, key, order, "msg-"+key)       // dropped by the queue: one deduplication ID
			send(t, cl, url, key, key, order, "again-msg-"+key) // kept: a duplicate for the Runner
		}
	}
	var mu sync.Mutex
	order := map[string][]string{}
	rec := &recorder{}
	c, err := sqs.NewConsumer(cl, sqs.Options{Runner: memoryRunner(t), QueueURL: url, Logger: quietLog, Hooks: []sqs.Hook{rec}, WaitTime: time.Second},
		func(ctx context.Context, m types.Message) ([]byte, error) {
			mu.Lock()
			group := aws.ToString(m.Body)[:1]
			order[group] = append(order[group], aws.ToString(m.Body))
			mu.Unlock()
			return nil, nil
		})
	if err != nil {
		t.Fatal(err)
	}
	run(t, c)
	testenv.Eventually(t, "15 messages processed and 15 duplicates", func() bool {
		return rec.count(queue.EventProcessed) == 15 && rec.count(queue.EventDuplicate) == 15
	})
	mu.Lock()
	defer mu.Unlock()
	for _, g := range []string{"a", "b", "c"} {
		for step, body := range order[g] {
			if want := fmt.Sprintf("%s-step-%d", g, step); body != want {
				t.Fatalf("group %s ran %v, want its 5 steps in order", g, order[g])
			}
		}
	}
}

// A message that keeps failing is received MaxAttempts times and ended:
// deleted and reported on a queue without a redrive policy, moved to its
// dead-letter queue with why on one with; one without a key and one whose
// handler says the failure is permanent end at once, and a panicking
// handler is a failed receive.
func TestFailuresAreBounded(t *testing.T) {
	s := sqstest.Start(t)
	cl := client(s)
	for _, redrive := range []bool{false, true} {
		t.Run(fmt.Sprint("redrive=", redrive), func(t *testing.T) {
			name := "payments-" + uuid.NewString()[:8]
			var attrs map[string]string
			var dlq string
			if redrive {
				dlq = createQueue(t, cl, name+"-dlq", nil)
				attrs = map[string]string{"RedrivePolicy": fmt.Sprintf(`{"deadLetterTargetArn":%q,"maxReceiveCount":"3"}`, arn(t, cl, dlq))}
			}
			url := createQueue(t, cl, name, attrs)
			send(t, cl, url, "bad", "always fails")
			send(t, cl, url, "", "no key")
			send(t, cl, url, "permanent", "unparseable")
			send(t, cl, url, "panics", "panics once")
			send(t, cl, url, "good", "fine")
			var mu sync.Mutex
			ran := map[string]int{}
			rec := &recorder{}
			c, err := sqs.NewConsumer(cl, sqs.Options{Runner: memoryRunner(t), QueueURL: url, Logger: quietLog, Hooks: []sqs.Hook{rec},
				MaxAttempts: 3, WaitTime: time.Second, Backoff: queue.Backoff{Base: time.Millisecond, Max: time.Millisecond}},
				func(ctx context.Context, m types.Message) ([]byte, error) {
					key := aws.ToString(m.Body)
					mu.Lock()
					ran[key]++
					n := ran[key]
					mu.Unlock()
					switch key {
					case "always fails":
						return nil, errors.New("the payment provider refused")
					case "unparseable":
						return nil, queue.Permanent(errors.New("the event does not parse"))
					case "panics once":
						if n == 1 {
							panic("nil map")
						}
					}
					return nil, nil
				})
			if err != nil {
				t.Fatal(err)
			}
			run(t, c)
			testenv.Eventually(t, "two processed and three ended", func() bool { return rec.count(queue.EventProcessed) == 2 && rec.count(queue.EventDead) == 3 })
			mu.Lock()
			if ran["always fails"] != 3 || ran["unparseable"] != 1 || ran["panics once"] != 2 || ran["fine"] != 1 || ran["no key"] != 0 {
				t.Errorf("runs %v, want always fails 3 (MaxAttempts), unparseable 1, panics once 2, fine 1, no key 0", ran)
			}
			mu.Unlock()
			if redrive {
				out, err := cl.ReceiveMessage(context.Background(), &awssqs.ReceiveMessageInput{QueueUrl: aws.String(dlq), MaxNumberOfMessages: 10,
					MessageAttributeNames: []string{"All"}})
				if err != nil {
					t.Fatal(err)
				}
				dead := map[string]bool{}
				for _, m := range out.Messages {
					if a := m.MessageAttributes[sqs.DeadErrorAttribute]; a.StringValue == nil || *a.StringValue == "" {
						t.Errorf("dead letter %q has no %s", aws.ToString(m.Body), sqs.DeadErrorAttribute)
					}
					dead[aws.ToString(m.Body)] = true
				}
				if len(dead) != 3 || !dead["always fails"] || !dead["no key"] || !dead["unparseable"] {
					t.Errorf("the dead-letter queue holds %v, want the three that could not run", dead)
				}
			}
			testenv.Eventually(t, "the queue empty", func() bool { return depth(t, cl, url) == 0 })
		})
	}
}

// A handler that runs past the visibility timeout keeps its message: its
// visibility is extended while it runs, so a second consumer does not
// receive it meanwhile.
func TestLongHandlerKeepsItsMessage(t *testing.T) {
	s := sqstest.Start(t)
	cl := client(s)
	url := createQueue(t, cl, "slow-"+uuid.NewString()[:8], nil)
	send(t, cl, url, "slow-order", "takes long")
	runner := memoryRunner(t)
	started := make(chan struct{})
	var runs sync.WaitGroup
	runs.Add(1)
	first, err := sqs.NewConsumer(cl, sqs.Options{Runner: runner, QueueURL: url, Logger: quietLog, VisibilityTimeout: time.Second, WaitTime: time.Second},
		func(ctx context.Context, m types.Message) ([]byte, error) {
			close(started)
			time.Sleep(1600 * time.Millisecond) // past its 1 s visibility timeout
			runs.Done()
			return nil, nil
		})
	if err != nil {
		t.Fatal(err)
	}
	run(t, first)
	<-started
	rec := &recorder{}
	second, err := sqs.NewConsumer(cl, sqs.Options{Runner: memoryRunner(t), QueueURL: url, Logger: quietLog, Hooks: []sqs.Hook{rec},
		VisibilityTimeout: time.Second, WaitTime: time.Second},
		func(ctx context.Context, m types.Message) ([]byte, error) { return nil, nil })
	if err != nil {
		t.Fatal(err)
	}
	run(t, second)
	runs.Wait()
	testenv.Eventually(t, "the queue empty", func() bool { return depth(t, cl, url) == 0 })
	if n := len(rec.Events()); n != 0 {
		t.Errorf("the second consumer received the message %d times while the first ran it", n)
	}
}

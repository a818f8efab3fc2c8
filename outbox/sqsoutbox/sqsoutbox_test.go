package sqsoutbox_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
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
	"github.com/retryhttp/retryhttp/outbox"
	"github.com/retryhttp/retryhttp/outbox/internal/outboxtest"
	"github.com/retryhttp/retryhttp/outbox/sqsoutbox"
	"github.com/retryhttp/retryhttp/queue"
	"github.com/retryhttp/retryhttp/queue/sqs"
	"github.com/retryhttp/retryhttp/shared/sqstest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func client(s *sqstest.Server) *awssqs.Client {
	return awssqs.New(awssqs.Options{Region: "us-east-1", BaseEndpoint: aws.String(s.URL),
		Credentials: credentials.NewStaticCredentialsProvider("test", "test", "")})
}

func createQueue(t testing.TB, cl *awssqs.Client, name string, attrs map[string]string) string {
	t.Helper()
	out, err := cl.CreateQueue(context.Background(), &awssqs.CreateQueueInput{QueueName: aws.String(name), Attributes: attrs})
	if err != nil {
		t.Fatal(err)
	}
	return aws.ToString(out.QueueUrl)
}

// receiveAll receives the queue's copies, deleting none, until it holds
// want of them (told apart by their SQS message IDs) and one receive more
// comes back empty, or ten seconds pass. A copy is invisible for five
// seconds after each receive, so that one whose answer was lost on a
// loaded machine (received on the queue's side, not on the test's) comes
// back; the latest receipt of each copy is kept.
func receiveAll(t testing.TB, cl *awssqs.Client, queueURL string, want int) []types.Message {
	t.Helper()
	var all []types.Message
	at := map[string]int{} // SQS message ID: its place in all
	deadline := time.Now().Add(10 * time.Second)
	for {
		var wait int32
		if len(all) < want {
			wait = 1 // some copies are still to come: a long poll
		}
		out, err := cl.ReceiveMessage(context.Background(), &awssqs.ReceiveMessageInput{QueueUrl: aws.String(queueURL), MaxNumberOfMessages: 10,
			VisibilityTimeout: 5, WaitTimeSeconds: wait, MessageAttributeNames: []string{"All"},
			MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameMessageGroupId}})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range out.Messages {
			if i, ok := at[aws.ToString(m.MessageId)]; ok {
				all[i] = m
				continue
			}
			at[aws.ToString(m.MessageId)] = len(all)
			all = append(all, m)
		}
		if len(out.Messages) == 0 && (len(all) >= want || time.Now().After(deadline)) {
			return all
		}
	}
}

// consume runs a Consumer of queue/sqs, with its default key, over the
// queue until it has reported n outcomes, calling effect (one call at a
// time) for each message it runs, and returns the outcomes.
func consume(t *testing.T, cl *awssqs.Client, queueURL string, n int, effect func(types.Message)) []sqs.Event {
	t.Helper()
	runner, err := idempotency.NewRunner(idempotency.RunnerOptions{Logger: outboxtest.Quiet})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var events []sqs.Event
	c, err := sqs.NewConsumer(cl, sqs.Options{Runner: runner, QueueURL: queueURL, Logger: outboxtest.Quiet, WaitTime: time.Second,
		Hooks: []sqs.Hook{sqs.HookFunc(func(_ context.Context, e sqs.Event) { mu.Lock(); events = append(events, e); mu.Unlock() })}},
		func(ctx context.Context, m types.Message) ([]byte, error) {
			mu.Lock()
			effect(m)
			mu.Unlock()
			return nil, nil
		})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); c.Run(ctx) }()
	outboxtest.Eventually(t, "every copy run, replayed or dead", func() bool { mu.Lock(); defer mu.Unlock(); return len(events) >= n })
	cancel()
	<-done
	return events
}

func attr(m types.Message, name string) string {
	return aws.ToString(m.MessageAttributes[name].StringValue)
}

// Every message is sent twice (its relay lost the first outcome): a
// standard queue holds both copies, a FIFO queue one, deduplicated by the
// message's ID, in the group of its business key; each carries its ID,
// its header and its body, and a Consumer of queue/sqs runs each order
// once.
func TestOneEffectPerMessage(t *testing.T) {
	s := sqstest.Start(t)
	cl := client(s)
	p := outboxtest.Pool(t)
	for _, fifo := range []bool{false, true} {
		t.Run(fmt.Sprint("fifo=", fifo), func(t *testing.T) {
			name, attrs := "orders-"+uuid.NewString()[:8], map[string]string(nil)
			if fifo {
				name, attrs = name+".fifo", map[string]string{"FifoQueue": "true"}
			}
			queueURL := createQueue(t, cl, name, attrs)
			o := outboxtest.New(t, p)
			const n = 50
			ids := map[string]string{} // message ID: order
			for i := range n {
				order := fmt.Sprint("order-", i)
				id, err := o.Enqueue(context.Background(), p, outbox.Message{URL: sqsoutbox.URL(queueURL, order), Body: fmt.Appendf(nil, "placed %d", i),
					Header: http.Header{"Idempotency-Key": {order}, "Content-Type": {"text/plain"}}})
				if err != nil {
					t.Fatal(err)
				}
				ids[id] = order
			}
			sender, err := sqsoutbox.New(cl)
			if err != nil {
				t.Fatal(err)
			}
			outboxtest.Run(t, outbox.RelayOptions{Outbox: o, PollInterval: 10 * time.Millisecond,
				Senders: map[string]outbox.Sender{sqsoutbox.Scheme: outboxtest.Forgetful(sender)},
				Backoff: queue.Backoff{Base: 10 * time.Millisecond, Max: 10 * time.Millisecond}})
			outboxtest.Eventually(t, "every message delivered", func() bool { return outboxtest.Pending(t, p, o) == 0 })

			copies := map[string]int{}
			want := 2
			if fifo {
				want = 1
			}
			for _, m := range receiveAll(t, cl, queueURL, want*n) {
				id := attr(m, sqsoutbox.MessageIDAttribute)
				order, ok := ids[id]
				switch {
				case !ok:
					t.Fatalf("a message with ID %q, not one of the outbox's", id)
				case attr(m, "Idempotency-Key") != order || attr(m, "Content-Type") != "text/plain" || !strings.HasPrefix(aws.ToString(m.Body), "placed "):
					t.Fatalf("message %s lost its header or body: %v %q", id, m.MessageAttributes, aws.ToString(m.Body))
				case fifo && m.Attributes[string(types.MessageSystemAttributeNameMessageGroupId)] != order:
					t.Fatalf("message %s in group %q, want its order %s", id, m.Attributes[string(types.MessageSystemAttributeNameMessageGroupId)], order)
				}
				copies[id]++
				// Visible again, for the consumer below.
				if _, err := cl.ChangeMessageVisibility(context.Background(), &awssqs.ChangeMessageVisibilityInput{QueueUrl: aws.String(queueURL),
					ReceiptHandle: m.ReceiptHandle, VisibilityTimeout: 0}); err != nil {
					t.Fatal(err)
				}
			}
			for id := range ids {
				if copies[id] != want {
					t.Fatalf("message %s: %d copies in the queue, want %d", id, copies[id], want)
				}
			}

			effects := map[string]int{}
			consume(t, cl, queueURL, want*n, func(m types.Message) { effects[attr(m, "Idempotency-Key")]++ })
			for _, order := range ids {
				if effects[order] != 1 {
					t.Fatalf("%s had %d effects, want 1", order, effects[order])
				}
			}
		})
	}
}

// Messages enqueued without a key of their own, and with one under each
// name, reach SQS with an Idempotency-Key attribute: their own, or their
// ID. Each is sent twice, and a Consumer of queue/sqs with its default key
// runs each message once and dead-letters none.
func TestDefaultKey(t *testing.T) {
	s := sqstest.Start(t)
	cl := client(s)
	p := outboxtest.Pool(t)
	o := outboxtest.New(t, p)
	queueURL := createQueue(t, cl, "keyless-"+uuid.NewString()[:8], nil)
	family := outboxtest.KeyFamily(12)
	want := map[string]string{} // message ID: its key
	for _, k := range family {
		id, err := o.Enqueue(context.Background(), p, outbox.Message{URL: sqsoutbox.URL(queueURL, ""), Header: k.Header, Body: []byte("placed")})
		if err != nil {
			t.Fatal(err)
		}
		want[id] = k.Key
		if k.Key == "" {
			want[id] = id
		}
	}
	sender, err := sqsoutbox.New(cl)
	if err != nil {
		t.Fatal(err)
	}
	outboxtest.Run(t, outbox.RelayOptions{Outbox: o, PollInterval: 10 * time.Millisecond,
		Senders: map[string]outbox.Sender{sqsoutbox.Scheme: outboxtest.Forgetful(sender)},
		Backoff: queue.Backoff{Base: 10 * time.Millisecond, Max: 10 * time.Millisecond}})
	outboxtest.Eventually(t, "every message delivered", func() bool { return outboxtest.Pending(t, p, o) == 0 })

	effects := map[string]int{}
	var bad []string
	events := consume(t, cl, queueURL, 2*len(family), func(m types.Message) {
		id := attr(m, sqsoutbox.MessageIDAttribute)
		effects[id]++
		if got := attr(m, sqs.KeyAttribute); got != want[id] {
			bad = append(bad, fmt.Sprintf("message %s has %s %q, want %q", id, sqs.KeyAttribute, got, want[id]))
		}
	})
	for _, e := range events {
		if e.Kind != queue.EventProcessed && e.Kind != queue.EventDuplicate {
			bad = append(bad, fmt.Sprint(e.Kind, ": ", e.Err))
		}
	}
	for _, b := range bad {
		t.Error(b)
	}
	for id := range want {
		if effects[id] != 1 {
			t.Errorf("message %s had %d effects, want 1", id, effects[id])
		}
	}
}

// SQS carries ten attributes, the message ID's and the Idempotency-Key's
// among them: through the relay, a message with up to eight other header
// names arrives with every one of them, a message with nine or more is
// dead at once with the reason, whether it set its own key or not.
func TestAttributeLimit(t *testing.T) {
	s := sqstest.Start(t)
	cl := client(s)
	p := outboxtest.Pool(t)
	o := outboxtest.New(t, p)
	queueURL := createQueue(t, cl, "attrs-"+uuid.NewString()[:8], nil)
	sender, err := sqsoutbox.New(cl)
	if err != nil {
		t.Fatal(err)
	}
	type msg struct {
		names int
		own   bool
	}
	ids := map[string]msg{}
	for names := 0; names <= 10; names++ {
		for _, own := range []bool{false, true} {
			h := http.Header{}
			for i := range names {
				h.Set(fmt.Sprint("X-H", i), "v")
			}
			if own {
				h.Set("Idempotency-Key", uuid.NewString())
			}
			id, err := o.Enqueue(context.Background(), p, outbox.Message{URL: sqsoutbox.URL(queueURL, ""), Header: h, Body: []byte("b")})
			if err != nil {
				t.Fatal(err)
			}
			ids[id] = msg{names, own}
		}
	}
	outboxtest.Run(t, outbox.RelayOptions{Outbox: o, PollInterval: 10 * time.Millisecond, Senders: map[string]outbox.Sender{sqsoutbox.Scheme: sender}})
	outboxtest.Eventually(t, "every message delivered or dead", func() bool {
		var n int
		if err := p.QueryRow(context.Background(), "SELECT count(*) FROM "+o.Table()+" WHERE status = 'pending'").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n == 0
	})
	delivered := 0
	for id, m := range ids {
		st, err := o.State(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		wantStatus := outbox.Delivered
		if m.names > 8 {
			wantStatus = outbox.Dead
		}
		if st.Status != wantStatus {
			t.Errorf("%d other header names (own key %v): %s (%s), want %s", m.names, m.own, st.Status, st.LastError, wantStatus)
		}
		if st.Status == outbox.Dead && !strings.Contains(st.LastError, "attributes") {
			t.Errorf("%d other header names: dead with %q, want the attribute limit named", m.names, st.LastError)
		}
		if st.Status == outbox.Delivered {
			delivered++
		}
	}
	for _, m := range receiveAll(t, cl, queueURL, delivered) {
		id := attr(m, sqsoutbox.MessageIDAttribute)
		if got, want := len(m.MessageAttributes), ids[id].names+2; got != want {
			t.Errorf("message %s with %d other header names arrived with %d attributes, want %d: %v", id, ids[id].names, got, want, m.MessageAttributes)
		}
	}
}

// A URL without a queue and a header with more names than SQS carries
// are refused for good; a queue that does not exist is a failure the
// relay tries again.
func TestUndeliverable(t *testing.T) {
	s := sqstest.Start(t)
	sender, err := sqsoutbox.New(client(s))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, raw := range []string{"sqs:", "sqs:not-a-url", sqsoutbox.URL("ftp://host/q", ""), "sqs:" + url.QueryEscape(s.URL+"/000000000000/q") + "?group=%zz"} {
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		if r := sender.Send(ctx, outbox.Delivery{ID: "m", URL: u}); r.Err == nil || !r.Final {
			t.Errorf("%s: %+v, want a final error", raw, r)
		}
	}
	queueURL := createQueue(t, client(s), "q-"+uuid.NewString()[:8], nil)
	u, _ := url.Parse(sqsoutbox.URL(queueURL, ""))
	many := http.Header{}
	for i := range 10 {
		many.Set(fmt.Sprint("X-H", i), "v")
	}
	if r := sender.Send(ctx, outbox.Delivery{ID: "m", URL: u, Header: many}); r.Err == nil || !r.Final {
		t.Errorf("ten header names and the ID: %+v, want a final error", r)
	}
	missing, _ := url.Parse(sqsoutbox.URL(s.URL+"/000000000000/missing-"+uuid.NewString()[:8], ""))
	if r := sender.Send(ctx, outbox.Delivery{ID: "m", URL: missing}); r.Err == nil || r.Final {
		t.Errorf("a missing queue: %+v, want an error to try again", r)
	}
}

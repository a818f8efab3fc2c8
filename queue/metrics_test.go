package queue_test

import (
	"context"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/retryhttp/retryhttp/queue"
)

// Two consumers of two brokers on one registry share the series, each
// outcome shown at 0 from the start, and bad input is refused.
func TestMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	a, err := queue.NewMetrics[string](reg, "nats", "fulfilment")
	if err != nil {
		t.Fatal(err)
	}
	b, err := queue.NewMetrics[int](reg, "rabbitmq", "emails")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	a.OnEvent(ctx, queue.Event[string]{Kind: queue.EventProcessed, Attempt: 1})
	a.OnEvent(ctx, queue.Event[string]{Kind: queue.EventProcessed, Attempt: 2})
	b.OnEvent(ctx, queue.Event[int]{Kind: queue.EventDead, Attempt: 3})
	b.OnEvent(ctx, queue.Event[int]{Kind: 0, Attempt: 1}) // no outcome: not counted
	var none *queue.Metrics[int]
	none.OnEvent(ctx, queue.Event[int]{Kind: queue.EventProcessed, Attempt: 2})
	const want = `
# HELP queue_messages_total Queue deliveries run through a retryhttp consumer wrapper, by broker, consumer and outcome.
# TYPE queue_messages_total counter
queue_messages_total{broker="nats",consumer="fulfilment",outcome="dead"} 0
queue_messages_total{broker="nats",consumer="fulfilment",outcome="duplicate"} 0
queue_messages_total{broker="nats",consumer="fulfilment",outcome="failed"} 0
queue_messages_total{broker="nats",consumer="fulfilment",outcome="processed"} 2
queue_messages_total{broker="rabbitmq",consumer="emails",outcome="dead"} 1
queue_messages_total{broker="rabbitmq",consumer="emails",outcome="duplicate"} 0
queue_messages_total{broker="rabbitmq",consumer="emails",outcome="failed"} 0
queue_messages_total{broker="rabbitmq",consumer="emails",outcome="processed"} 0
# HELP queue_redeliveries_total Queue deliveries that were not a message's first, by broker and consumer.
# TYPE queue_redeliveries_total counter
queue_redeliveries_total{broker="nats",consumer="fulfilment"} 1
queue_redeliveries_total{broker="rabbitmq",consumer="emails"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
		t.Fatal(err)
	}
	for _, bad := range [][2]string{{"", "x"}, {"nats", ""}} {
		if _, err := queue.NewMetrics[int](reg, bad[0], bad[1]); err == nil {
			t.Errorf("NewMetrics(%q, %q) accepted", bad[0], bad[1])
		}
	}
	if _, err := queue.NewMetrics[int](nil, "nats", "x"); err == nil {
		t.Error("a nil Registerer accepted")
	}
}

package queue_test

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/retryhttp/retryhttp/queue"
)

// Two consumers of two brokers on one registry share the series, each
// outcome shown at 0 from the start, and bad input is refused.
func TestCounter(t *testing.T) {
	reg := prometheus.NewRegistry()
	a, err := queue.NewCounter(reg, "nats", "fulfilment", "processed", "duplicate")
	if err != nil {
		t.Fatal(err)
	}
	b, err := queue.NewCounter(reg, "rabbitmq", "emails", "processed")
	if err != nil {
		t.Fatal(err)
	}
	a.Count("processed", false)
	a.Count("processed", true)
	b.Count("rejected", true) // an outcome not named up front still counts
	var none *queue.Counter
	none.Count("processed", true)
	const want = `
# HELP queue_messages_total Queue deliveries run through a retryhttp consumer wrapper, by broker, consumer and outcome.
# TYPE queue_messages_total counter
queue_messages_total{broker="nats",consumer="fulfilment",outcome="duplicate"} 0
queue_messages_total{broker="nats",consumer="fulfilment",outcome="processed"} 2
queue_messages_total{broker="rabbitmq",consumer="emails",outcome="processed"} 0
queue_messages_total{broker="rabbitmq",consumer="emails",outcome="rejected"} 1
# HELP queue_redeliveries_total Queue deliveries that were not a message's first, by broker and consumer.
# TYPE queue_redeliveries_total counter
queue_redeliveries_total{broker="nats",consumer="fulfilment"} 1
queue_redeliveries_total{broker="rabbitmq",consumer="emails"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
		t.Fatal(err)
	}
	for _, bad := range [][2]string{{"", "x"}, {"nats", ""}} {
		if _, err := queue.NewCounter(reg, bad[0], bad[1]); err == nil {
			t.Errorf("NewCounter(%q, %q) accepted", bad[0], bad[1])
		}
	}
	if _, err := queue.NewCounter(nil, "nats", "x"); err == nil {
		t.Error("a nil Registerer accepted")
	}
}

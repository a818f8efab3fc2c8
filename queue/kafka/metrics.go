package kafka

import (
	"context"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/retryhttp/retryhttp/queue"
)

// Metrics counts a Consumer's records. It is a Hook: put it in
// Options.Hooks. It counts into the series of package
// github.com/retryhttp/retryhttp/queue, with broker="kafka":
//
//	queue_messages_total{broker="kafka",consumer,outcome}  processed, duplicate, failed (run again), dead
//	queue_redeliveries_total{broker="kafka",consumer}      attempts after a record's first in this process
//
// queue/natsjs and queue/rabbitmq count into the same series. A nil
// *Metrics counts nothing.
type Metrics struct{ c *queue.Counter }

// NewMetrics registers the counters on reg for the consumer named
// consumer (its group, say). NewMetrics for several consumers on one
// registry shares the counters, labelled by consumer.
func NewMetrics(reg prometheus.Registerer, consumer string) (*Metrics, error) {
	c, err := queue.NewCounter(reg, "kafka", consumer,
		EventProcessed.String(), EventDuplicate.String(), EventFailed.String(), EventDead.String())
	if err != nil {
		return nil, fmt.Errorf("kafka: %w", err)
	}
	return &Metrics{c: c}, nil
}

// OnEvent counts e.
func (m *Metrics) OnEvent(_ context.Context, e Event) {
	if m == nil {
		return
	}
	m.c.Count(e.Kind.String(), e.Attempt > 1)
}

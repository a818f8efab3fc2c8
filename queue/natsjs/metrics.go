package natsjs

import (
	"context"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/retryhttp/retryhttp/queue"
)

// Metrics counts a consumer's deliveries. It is a Hook: put it in
// Options.Hooks. It counts into the series of package
// github.com/retryhttp/retryhttp/queue, with broker="nats":
//
//	queue_messages_total{broker="nats",consumer,outcome}  processed, duplicate, failed (redelivered later),
//	                                                      terminated (dead)
//	queue_redeliveries_total{broker="nats",consumer}      deliveries that were not a message's first
//
// queue/rabbitmq counts into the same series with broker="rabbitmq". A
// nil *Metrics counts nothing.
type Metrics struct{ c *queue.Counter }

// NewMetrics registers the counters on reg for the consumer named
// consumer (a stream's durable consumer, say). NewMetrics for several
// consumers on one registry shares the counters, labelled by consumer.
func NewMetrics(reg prometheus.Registerer, consumer string) (*Metrics, error) {
	c, err := queue.NewCounter(reg, "nats", consumer,
		EventProcessed.String(), EventDuplicate.String(), EventFailed.String(), EventTerminated.String())
	if err != nil {
		return nil, fmt.Errorf("natsjs: %w", err)
	}
	return &Metrics{c: c}, nil
}

// OnEvent counts e.
func (m *Metrics) OnEvent(_ context.Context, e Event) {
	if m == nil {
		return
	}
	m.c.Count(e.Kind.String(), e.Deliveries > 1)
}

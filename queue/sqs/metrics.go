package sqs

import (
	"context"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/retryhttp/retryhttp/queue"
)

// Metrics counts a Consumer's messages. It is a Hook: put it in
// Options.Hooks. It counts into the series of package
// github.com/retryhttp/retryhttp/queue, with broker="sqs":
//
//	queue_messages_total{broker="sqs",consumer,outcome}  processed, duplicate, failed (visible again), dead
//	queue_redeliveries_total{broker="sqs",consumer}      receives that were not a message's first
//
// A nil *Metrics counts nothing.
type Metrics struct{ c *queue.Counter }

// NewMetrics registers the counters on reg for the consumer named
// consumer (its queue, say). NewMetrics for several consumers on one
// registry shares the counters, labelled by consumer.
func NewMetrics(reg prometheus.Registerer, consumer string) (*Metrics, error) {
	c, err := queue.NewCounter(reg, "sqs", consumer,
		EventProcessed.String(), EventDuplicate.String(), EventFailed.String(), EventDead.String())
	if err != nil {
		return nil, fmt.Errorf("sqs: %w", err)
	}
	return &Metrics{c: c}, nil
}

// OnEvent counts e.
func (m *Metrics) OnEvent(_ context.Context, e Event) {
	if m == nil {
		return
	}
	m.c.Count(e.Kind.String(), e.Receives > 1)
}

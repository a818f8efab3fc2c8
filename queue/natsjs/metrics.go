package natsjs

import (
	"context"
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics counts a consumer's deliveries. It is a Hook: put it in
// Options.Hooks.
//
//	queue_messages_total{broker="nats",consumer,outcome}  deliveries by outcome: processed, duplicate,
//	                                                      failed (redelivered later), terminated (dead)
//	queue_redeliveries_total{broker="nats",consumer}      deliveries that were not a message's first
//
// queue/rabbitmq counts into the same series with broker="rabbitmq", so
// one dashboard and one set of rules serve both. A nil *Metrics counts
// nothing.
type Metrics struct {
	messages     *prometheus.CounterVec
	redeliveries prometheus.Counter
	consumer     string
}

// NewMetrics registers the counters on reg for the consumer named
// consumer (a stream's durable consumer, say). NewMetrics for several
// consumers on one registry shares the counters, labelled by consumer.
func NewMetrics(reg prometheus.Registerer, consumer string) (*Metrics, error) {
	if reg == nil || consumer == "" {
		return nil, errors.New("natsjs: NewMetrics: nil Registerer or empty consumer name")
	}
	messages, err := register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "queue_messages_total",
		Help: "Queue deliveries run through a retryhttp consumer wrapper, by broker, consumer and outcome.",
	}, []string{"broker", "consumer", "outcome"}))
	if err != nil {
		return nil, err
	}
	redeliveries, err := register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "queue_redeliveries_total",
		Help: "Queue deliveries that were not a message's first, by broker and consumer.",
	}, []string{"broker", "consumer"}))
	if err != nil {
		return nil, err
	}
	m := &Metrics{messages: messages, redeliveries: redeliveries.WithLabelValues("nats", consumer), consumer: consumer}
	for _, k := range []EventKind{EventProcessed, EventDuplicate, EventFailed, EventTerminated} {
		messages.WithLabelValues("nats", consumer, k.String()) // every outcome shows, at 0
	}
	return m, nil
}

// OnEvent counts e.
func (m *Metrics) OnEvent(_ context.Context, e Event) {
	if m == nil {
		return
	}
	m.messages.WithLabelValues("nats", m.consumer, e.Kind.String()).Inc()
	if e.Deliveries > 1 {
		m.redeliveries.Inc()
	}
}

// register registers c, or returns the collector of the same description
// already registered (by another consumer's NewMetrics, or queue/rabbitmq's).
func register[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	err := reg.Register(c)
	if err == nil {
		return c, nil
	}
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if existing, ok := are.ExistingCollector.(C); ok {
			return existing, nil
		}
	}
	return c, fmt.Errorf("natsjs: NewMetrics: %w", err)
}

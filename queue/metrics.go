package queue

import (
	"context"
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/retryhttp/retryhttp/internal/promreg"
)

// Metrics counts a consumer's attempts. It is a Hook: put it in the
// consumer's Options.Hooks. Every consumer counts into the same series,
// labelled by broker, so one dashboard and one set of rules serve them
// all:
//
//	queue_messages_total{broker,consumer,outcome}  attempts by outcome (an EventKind: processed, duplicate, failed, dead)
//	queue_redeliveries_total{broker,consumer}      attempts that were not a message's first
//
// A nil *Metrics counts nothing.
type Metrics[M any] struct {
	outcomes     [EventDead + 1]prometheus.Counter
	redeliveries prometheus.Counter
}

// NewMetrics registers the series on reg (or shares them, when another
// consumer registered them already) and returns the counters of the
// consumer named consumer (its group, its queue) on broker, each outcome
// shown at 0 from the start. queue/natsjs, queue/rabbitmq, queue/kafka and
// queue/sqs each have a NewMetrics that names its broker.
func NewMetrics[M any](reg prometheus.Registerer, broker, consumer string) (*Metrics[M], error) {
	if reg == nil || broker == "" || consumer == "" {
		return nil, errors.New("queue: NewMetrics: nil Registerer, or empty broker or consumer name")
	}
	messages, err := promreg.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "queue_messages_total",
		Help: "Queue deliveries run through a retryhttp consumer wrapper, by broker, consumer and outcome.",
	}, []string{"broker", "consumer", "outcome"}))
	if err != nil {
		return nil, fmt.Errorf("queue: NewMetrics: %w", err)
	}
	redeliveries, err := promreg.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "queue_redeliveries_total",
		Help: "Queue deliveries that were not a message's first, by broker and consumer.",
	}, []string{"broker", "consumer"}))
	if err != nil {
		return nil, fmt.Errorf("queue: NewMetrics: %w", err)
	}
	m := &Metrics[M]{redeliveries: redeliveries.WithLabelValues(broker, consumer)}
	for k := EventProcessed; k <= EventDead; k++ {
		m.outcomes[k] = messages.WithLabelValues(broker, consumer, k.String())
	}
	return m, nil
}

// OnEvent counts e.
func (m *Metrics[M]) OnEvent(_ context.Context, e Event[M]) {
	if m == nil || e.Kind < EventProcessed || e.Kind > EventDead {
		return
	}
	m.outcomes[e.Kind].Inc()
	if e.Attempt > 1 {
		m.redeliveries.Inc()
	}
}

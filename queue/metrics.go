// Package queue holds what the queue consumer wrappers share: the
// Prometheus series they count into, so that queue/natsjs, queue/rabbitmq,
// queue/kafka and queue/sqs (modules of their own) feed one dashboard and
// one set of rules (use those modules' NewMetrics; this package is the
// series they register); the failures every consumer treats alike:
// Permanent, for a handler to end a message that no redelivery can fix,
// and PanicError, what a handler's panic becomes; Backoff and Sleep, how
// a failure is waited out; and Hook and HookFunc, the shape of their
// hooks (each names its own, for its own Event).
//
//	queue_messages_total{broker,consumer,outcome}  deliveries by outcome
//	queue_redeliveries_total{broker,consumer}      deliveries that were not a message's first
package queue

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/retryhttp/retryhttp/internal/promreg"
)

// Counter counts the deliveries of one consumer of one broker.
type Counter struct {
	outcomes     map[string]prometheus.Counter
	messages     *prometheus.CounterVec
	broker, name string
	redeliveries prometheus.Counter
}

// NewCounter registers the series on reg (or shares them, when another
// consumer registered them already) and returns the counter of consumer
// on broker. outcomes are the outcomes it counts, shown at 0 from the
// start.
func NewCounter(reg prometheus.Registerer, broker, consumer string, outcomes ...string) (*Counter, error) {
	if reg == nil || broker == "" || consumer == "" {
		return nil, errors.New("queue: NewCounter: nil Registerer, or empty broker or consumer name")
	}
	messages, err := promreg.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "queue_messages_total",
		Help: "Queue deliveries run through a retryhttp consumer wrapper, by broker, consumer and outcome.",
	}, []string{"broker", "consumer", "outcome"}))
	if err != nil {
		return nil, fmt.Errorf("queue: NewCounter: %w", err)
	}
	redeliveries, err := promreg.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "queue_redeliveries_total",
		Help: "Queue deliveries that were not a message's first, by broker and consumer.",
	}, []string{"broker", "consumer"}))
	if err != nil {
		return nil, fmt.Errorf("queue: NewCounter: %w", err)
	}
	c := &Counter{outcomes: map[string]prometheus.Counter{}, messages: messages, broker: broker, name: consumer,
		redeliveries: redeliveries.WithLabelValues(broker, consumer)}
	for _, o := range outcomes {
		c.outcomes[o] = messages.WithLabelValues(broker, consumer, o)
	}
	return c, nil
}

// Count counts one delivery with outcome, and whether it was a
// redelivery. A nil *Counter counts nothing.
func (c *Counter) Count(outcome string, redelivered bool) {
	if c == nil {
		return
	}
	if m, ok := c.outcomes[outcome]; ok {
		m.Inc()
	} else {
		c.messages.WithLabelValues(c.broker, c.name, outcome).Inc()
	}
	if redelivered {
		c.redeliveries.Inc()
	}
}

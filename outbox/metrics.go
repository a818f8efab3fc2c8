package outbox

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/retryhttp/retryhttp/shared/promreg"
)

// Metrics counts what relays do and reports what waits, per outbox table:
//
//	outbox_deliveries_total{table,outcome}  deliveries: delivered (the receiver accepted the message),
//	                                        retried (failed, to be tried again), dead (given up)
//	outbox_pending{table}                   messages waiting, read from the table when scraped
//	outbox_oldest_pending_seconds{table}    age of the oldest waiting message, read when scraped
//
// A nil *Metrics counts nothing.
type Metrics struct {
	outcomes *prometheus.CounterVec
}

type outcome int

const (
	outcomeDelivered outcome = iota
	outcomeRetried
	outcomeDead
)

// NewMetrics registers the relay counters on reg, and a collector that
// reads o's backlog at scrape time. NewMetrics for several outboxes on one
// registry shares the counters, labelled by table; call it once per table
// and registry.
func NewMetrics(reg prometheus.Registerer, o *Outbox) (*Metrics, error) {
	if reg == nil || o == nil {
		return nil, errors.New("outbox: NewMetrics: nil Registerer or Outbox")
	}
	m := &Metrics{}
	var err error
	if m.outcomes, err = register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "outbox_deliveries_total",
		Help: "Deliveries by outcome: delivered, retried (failed, to be tried again), dead (given up).",
	}, []string{"table", "outcome"})); err != nil {
		return nil, err
	}
	if err := reg.Register(&backlog{o: o}); err != nil {
		return nil, fmt.Errorf("outbox: NewMetrics: %w", err)
	}
	return m, nil
}

// register is promreg.Register with this package's error prefix.
func register[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	c, err := promreg.Register(reg, c)
	if err != nil {
		return c, fmt.Errorf("outbox: NewMetrics: %w", err)
	}
	return c, nil
}

var outcomeNames = [...]string{outcomeDelivered: "delivered", outcomeRetried: "retried", outcomeDead: "dead"}

func (m *Metrics) add(table string, oc outcome, n int) {
	m.outcomes.WithLabelValues(table, outcomeNames[oc]).Add(float64(n))
}

// backlog reads the pending messages at scrape time.
type backlog struct{ o *Outbox }

var (
	pendingDesc = prometheus.NewDesc("outbox_pending", "Messages waiting to be delivered.", []string{"table"}, nil)
	oldestDesc  = prometheus.NewDesc("outbox_oldest_pending_seconds", "Age of the oldest message waiting to be delivered.", []string{"table"}, nil)
)

// Describe sends nothing: an unchecked collector, so that the backlogs of
// several tables share the metric names on one registry.
func (b *backlog) Describe(chan<- *prometheus.Desc) {}

func (b *backlog) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	n, oldest, err := b.o.db.backlog(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(pendingDesc, fmt.Errorf("outbox: reading the backlog: %w", err))
		return
	}
	ch <- prometheus.MustNewConstMetric(pendingDesc, prometheus.GaugeValue, float64(n), b.o.table)
	ch <- prometheus.MustNewConstMetric(oldestDesc, prometheus.GaugeValue, oldest.Seconds(), b.o.table)
}

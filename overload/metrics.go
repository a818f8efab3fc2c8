package overload

import (
	"context"
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/retryhttp/retryhttp/internal/promreg"
)

// Metrics exports a Limiter's or a Shedder's events to Prometheus; put it
// in Options.Hooks. Labels: name is Options.Name, key the Limiter's key
// (the host, for a Transport; bounded by MaxKeys) and empty for a Shedder,
// priority the refused request's.
//
//	overload_limit{name,key}                  the limit, as of its last change or refusal
//	overload_in_flight{name,key}              the calls in flight, as of the last change of the limit or refusal
//	overload_refused_total{name,key,priority} the calls refused (a Shedder's shed requests)
type Metrics struct {
	limit    *prometheus.GaugeVec
	inFlight *prometheus.GaugeVec
	refused  *prometheus.CounterVec
}

// NewMetrics registers the collectors on reg. Two Metrics on one registry
// share them.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	if reg == nil {
		return nil, errors.New("overload: NewMetrics: nil Registerer")
	}
	m := &Metrics{}
	var err error
	if m.limit, err = register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "overload_limit",
		Help: "The adaptive concurrency limit of a key, as of its last change or refusal.",
	}, []string{"name", "key"})); err != nil {
		return nil, err
	}
	if m.inFlight, err = register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "overload_in_flight",
		Help: "Calls in flight under a key's limit, as of the last change of the limit or refusal.",
	}, []string{"name", "key"})); err != nil {
		return nil, err
	}
	if m.refused, err = register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "overload_refused_total",
		Help: "Calls refused by a concurrency limit: a Limiter's full queue or MaxWait, a Shedder's shed requests.",
	}, []string{"name", "key", "priority"})); err != nil {
		return nil, err
	}
	return m, nil
}

func register[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	c, err := promreg.Register(reg, c)
	if err != nil {
		err = fmt.Errorf("overload: NewMetrics: %w", err)
	}
	return c, err
}

// OnEvent sets the gauges and counts refusals.
func (m *Metrics) OnEvent(_ context.Context, e Event) {
	if m == nil {
		return
	}
	switch e.Kind {
	case EventLimit:
	case EventRefused:
		m.refused.WithLabelValues(e.Name, e.Key, e.Priority.String()).Inc()
	default:
		return
	}
	m.limit.WithLabelValues(e.Name, e.Key).Set(float64(e.Limit))
	m.inFlight.WithLabelValues(e.Name, e.Key).Set(float64(e.InFlight))
}

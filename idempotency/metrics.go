package idempotency

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Results, the result label of idempotency_requests_total.
const (
	ResultNew        = "new"         // the handler ran
	ResultReplayed   = "replayed"    // a stored response was replayed
	ResultInFlight   = "in_flight"   // 409: the same key is being processed
	ResultMismatch   = "mismatch"    // 422: the key was used for another payload
	ResultMissingKey = "missing_key" // no key on a method that takes one
	ResultInvalidKey = "invalid_key" // 400: a malformed key
	ResultStoreError = "store_error" // 503: the store failed
)

// Metrics counts the middleware's decisions. A nil *Metrics counts
// nothing. NewMetrics twice on one registry shares the series.
type Metrics struct {
	requests *prometheus.CounterVec
	byResult map[string]prometheus.Counter // resolved once, read-only after
}

// NewMetrics registers idempotency_requests_total{result} on reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	if reg == nil {
		return nil, errors.New("idempotency: NewMetrics: nil Registerer")
	}
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "idempotency_requests_total",
		Help: "Requests seen by the idempotency middleware, by result.",
	}, []string{"result"})
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if !errors.As(err, &are) {
			return nil, fmt.Errorf("idempotency: NewMetrics: %w", err)
		}
		existing, ok := are.ExistingCollector.(*prometheus.CounterVec)
		if !ok {
			return nil, fmt.Errorf("idempotency: NewMetrics: a different collector is registered under the same name: %w", err)
		}
		c = existing
	}
	m := &Metrics{requests: c, byResult: map[string]prometheus.Counter{}}
	for _, r := range []string{ResultNew, ResultReplayed, ResultInFlight, ResultMismatch, ResultMissingKey, ResultInvalidKey, ResultStoreError} {
		m.byResult[r] = c.WithLabelValues(r) // also exposes zeros, so rate() works from the start
	}
	return m, nil
}

func (m *Metrics) count(result string) {
	if m != nil {
		m.byResult[result].Inc()
	}
}

package idempotency

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/retryhttp/retryhttp/internal/promreg"
)

// Results, the result label of idempotency_requests_total: one per request
// the middleware saw with a method it applies to.
const (
	ResultNew          = "new"          // the handler ran and its response was stored
	ResultReleased     = "released"     // the handler ran, its outcome was not stored (5xx, 408, 409, 429, panic, rollback, too large) and the key was freed for the retry
	ResultReplayed     = "replayed"     // a stored response was replayed
	ResultInFlight     = "in_flight"    // 409: the same key is being processed
	ResultMismatch     = "mismatch"     // 422: the key was used for another payload
	ResultMissingKey   = "missing_key"  // no key (400 with RequireKey, else passed through)
	ResultInvalidKey   = "invalid_key"  // 400: a malformed key
	ResultUnauthorized = "unauthorized" // 401: the caller's scope could not be determined
	ResultTooLarge     = "too_large"    // 413: the request body is over MaxRequestBytes
	ResultStoreError   = "store_error"  // 503, or a response whose record could not be stored
)

// result indexes the results, one source for the label list and the
// counters.
type result uint8

const (
	resNew result = iota
	resReleased
	resReplayed
	resInFlight
	resMismatch
	resMissingKey
	resInvalidKey
	resUnauthorized
	resTooLarge
	resStoreError
)

var resultNames = [...]string{
	resNew: ResultNew, resReleased: ResultReleased, resReplayed: ResultReplayed, resInFlight: ResultInFlight,
	resMismatch: ResultMismatch, resMissingKey: ResultMissingKey, resInvalidKey: ResultInvalidKey,
	resUnauthorized: ResultUnauthorized, resTooLarge: ResultTooLarge, resStoreError: ResultStoreError,
}

// Metrics counts the middleware's decisions. A nil *Metrics counts
// nothing. NewMetrics twice on one registry shares the series.
//
//	idempotency_requests_total{result}           requests by result (see the Result constants)
//	idempotency_memory_evicted_early_total       completed records a MemoryStore evicted before their retention
type Metrics struct {
	requests     *prometheus.CounterVec
	byResult     [len(resultNames)]prometheus.Counter
	evictedEarly prometheus.Counter
}

// NewMetrics registers the middleware's collectors on reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	if reg == nil {
		return nil, errors.New("idempotency: NewMetrics: nil Registerer")
	}
	m := &Metrics{}
	var err error
	if m.requests, err = register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "idempotency_requests_total",
		Help: "Requests seen by the idempotency middleware, by result.",
	}, []string{"result"})); err != nil {
		return nil, err
	}
	if m.evictedEarly, err = register(reg, prometheus.NewCounter(prometheus.CounterOpts{
		Name: "idempotency_memory_evicted_early_total",
		Help: "Completed records a MemoryStore evicted to make room before their retention ended; a retry of such a key runs the handler again.",
	})); err != nil {
		return nil, err
	}
	for r, name := range resultNames {
		m.byResult[r] = m.requests.WithLabelValues(name) // zeros from the start, so rate() works
	}
	return m, nil
}

// register is promreg.Register with this package's error prefix.
func register[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	c, err := promreg.Register(reg, c)
	if err != nil {
		err = fmt.Errorf("idempotency: NewMetrics: %w", err)
	}
	return c, err
}

func (m *Metrics) count(r result) {
	if m != nil {
		m.byResult[r].Inc()
	}
}

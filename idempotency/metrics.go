package idempotency

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/retryhttp/retryhttp/internal/promreg"
)

// Result is what the middleware did with one request (or a Runner with
// one Do): the result label of idempotency_requests_total, and an
// EventResult's Result.
type Result uint8

// Results, one per request the middleware saw with a method it applies to.
const (
	ResultNew          Result = iota // the handler ran and its response was stored
	ResultReleased                   // the handler ran, its outcome was not stored (5xx, 408, 409, 429, panic, rollback, too large) and the key was freed for the retry
	ResultReplayed                   // a stored response was replayed
	ResultInFlight                   // 409: the same key is being processed
	ResultMismatch                   // 422: the key was used for another payload
	ResultMissingKey                 // no key (400 with RequireKey, else passed through)
	ResultInvalidKey                 // 400: a malformed key
	ResultUnauthorized               // 401: the caller's scope could not be determined
	ResultTooLarge                   // 413: the request body is over MaxRequestBytes
	ResultStoreError                 // 503, or a response whose record could not be stored

	numResults // the count of results above: resultNames has an entry for each
)

// resultNames are the results' labels, one source for the label list and
// the counters.
var resultNames = [numResults]string{
	ResultNew: "new", ResultReleased: "released", ResultReplayed: "replayed", ResultInFlight: "in_flight",
	ResultMismatch: "mismatch", ResultMissingKey: "missing_key", ResultInvalidKey: "invalid_key",
	ResultUnauthorized: "unauthorized", ResultTooLarge: "too_large", ResultStoreError: "store_error",
}

// String returns the result's label: "new", "replayed", ...
func (r Result) String() string {
	if r < numResults {
		return resultNames[r]
	}
	return "Result(" + strconv.Itoa(int(r)) + ")"
}

// Metrics counts the middleware's decisions. A nil *Metrics counts
// nothing. NewMetrics twice on one registry shares the series.
//
//	idempotency_requests_total{result}           requests by result (see the Result constants)
//	idempotency_memory_evicted_early_total       completed records a MemoryStore evicted before their retention
//	idempotency_cached_replays_total             replays the replay cache answered (CacheEntries), of the replayed ones:
//	                                             its hit rate is this over requests_total{result="replayed"}
type Metrics struct {
	requests      *prometheus.CounterVec
	byResult      [len(resultNames)]prometheus.Counter
	evictedEarly  prometheus.Counter
	cachedReplays prometheus.Counter
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
	if m.cachedReplays, err = register(reg, prometheus.NewCounter(prometheus.CounterOpts{
		Name: "idempotency_cached_replays_total",
		Help: "Replays answered by the replay cache (CacheEntries) without asking the store.",
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

// evictionCounter is a hook that counts a MemoryStore's early evictions:
// New finds it among Options.Hooks, so that the middleware knows no
// concrete observer type.
type evictionCounter interface{ earlyEvictions() prometheus.Counter }

func (m *Metrics) earlyEvictions() prometheus.Counter { return m.evictedEarly }

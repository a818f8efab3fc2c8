package retryhttp

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics counts what Transports do, in Prometheus collectors registered on
// the Registerer given to NewMetrics. A nil *Metrics counts nothing and
// costs nothing. One *Metrics may be shared by several Transports, and
// NewMetrics called twice on one registry returns collectors that share the
// registered series, so two Transports built apart still add up.
//
// Series (labels are bounded: methods outside the standard set are
// "unknown", attempts past 9 are "10+"):
//
//	retryhttp_requests_total{method,outcome}   logical requests (RoundTrip calls) by final outcome
//	retryhttp_attempts_total{attempt}          attempts sent, by number (1 = first send)
//	retryhttp_retries_total{reason}            retries scheduled, by trigger: a status, "network", "timeout"
//	retryhttp_give_ups_total{reason}           retryable failures not retried: attempts, elapsed, deadline,
//	                                           retry_after_too_long, budget, circuit_open, body
//	retryhttp_attempts_per_request             histogram, buckets 1..10
//	retryhttp_backoff_seconds                  histogram of the waits before retries
//	retryhttp_circuit_state{host}              0 closed, 1 half-open, 2 open, per host of a Breaker
//
// Outcomes: success (a final status below 400), status (a final status of
// 400 or more that was not retried), error (an error that was not retried),
// canceled (the caller's context ended), and each give-up reason.
//
// WithHostLabel adds a host label (scheme://host:port) to requests_total,
// retries_total and give_ups_total.
type Metrics struct {
	requests    *prometheus.CounterVec
	attempts    *prometheus.CounterVec
	retries     *prometheus.CounterVec
	giveUps     *prometheus.CounterVec
	perRequest  prometheus.Histogram
	backoff     prometheus.Histogram
	circuits    *circuitCollector
	requestsHot [len(methods)][len(outcomes)]prometheus.Counter // nil with a host label
	attemptsHot [10]prometheus.Counter
	hosts       *hostLabels // nil unless WithHostLabel
}

// MetricsOption changes what NewMetrics creates.
type MetricsOption func(*metricsOptions)

type metricsOptions struct{ maxHosts int }

// WithHostLabel adds a host label to requests_total, retries_total and
// give_ups_total, for at most maxHosts distinct hosts; requests to any
// further host are labelled "other", so a client that calls many hosts
// cannot grow the series without bound. Off by default: a label per host
// multiplies the series, and each labelled update costs a lookup.
func WithHostLabel(maxHosts int) MetricsOption {
	return func(o *metricsOptions) { o.maxHosts = maxHosts }
}

// hostLabels hands out the host label of a URL, bounded.
type hostLabels struct {
	max  int
	seen sync.Map // hostID -> string
	mu   sync.Mutex
	n    int // labels handed out; guarded by mu
}

// otherHost labels the hosts past WithHostLabel's bound.
const otherHost = "other"

func (h *hostLabels) label(u *url.URL) string {
	id := hostOf(u)
	if v, ok := h.seen.Load(id); ok {
		return v.(string)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if v, ok := h.seen.Load(id); ok {
		return v.(string)
	}
	if h.n >= h.max {
		return otherHost
	}
	label := id.String()
	h.seen.Store(id, label)
	h.n++
	return label
}

var methods = [...]string{
	http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
	http.MethodDelete, http.MethodOptions, http.MethodTrace, http.MethodConnect, "unknown",
}

// Outcomes of a logical request, the outcome label of requests_total.
const (
	outcomeSuccess  = "success"
	outcomeStatus   = "status"
	outcomeError    = "error"
	outcomeCanceled = "canceled"
)

var outcomes = [...]string{
	outcomeSuccess, outcomeStatus, outcomeError, outcomeCanceled,
	ReasonAttempts, ReasonElapsed, ReasonDeadline, ReasonRetryAfterTooLong,
	ReasonBudget, ReasonCircuitOpen, ReasonBody,
}

// methodIndex maps a method to its place in methods; a switch, since it
// runs on every request.
func methodIndex(m string) int {
	switch m {
	case "", http.MethodGet:
		return 0
	case http.MethodHead:
		return 1
	case http.MethodPost:
		return 2
	case http.MethodPut:
		return 3
	case http.MethodPatch:
		return 4
	case http.MethodDelete:
		return 5
	case http.MethodOptions:
		return 6
	case http.MethodTrace:
		return 7
	case http.MethodConnect:
		return 8
	}
	return len(methods) - 1
}

// outcomeIndex maps an outcome to its place in outcomes, or -1.
func outcomeIndex(o string) int {
	switch o {
	case outcomeSuccess:
		return 0
	case outcomeStatus:
		return 1
	case outcomeError:
		return 2
	case outcomeCanceled:
		return 3
	case ReasonAttempts:
		return 4
	case ReasonElapsed:
		return 5
	case ReasonDeadline:
		return 6
	case ReasonRetryAfterTooLong:
		return 7
	case ReasonBudget:
		return 8
	case ReasonCircuitOpen:
		return 9
	case ReasonBody:
		return 10
	}
	return -1
}

// NewMetrics creates the collectors and registers them on reg. It never
// touches the global registry unless reg is prometheus.DefaultRegisterer.
// If reg already holds retryhttp collectors with the same labels, they are
// reused; with other labels (one NewMetrics with WithHostLabel, one
// without) it is an error.
func NewMetrics(reg prometheus.Registerer, opts ...MetricsOption) (*Metrics, error) {
	if reg == nil {
		return nil, errors.New("retryhttp: NewMetrics: nil Registerer")
	}
	var o metricsOptions
	for _, opt := range opts {
		opt(&o)
	}
	m := &Metrics{}
	requestLabels, reasonLabels := []string{"method", "outcome"}, []string{"reason"}
	if o.maxHosts != 0 {
		if o.maxHosts < 0 {
			return nil, fmt.Errorf("retryhttp: NewMetrics: WithHostLabel(%d): the bound must be positive", o.maxHosts)
		}
		m.hosts = &hostLabels{max: o.maxHosts}
		requestLabels, reasonLabels = append(requestLabels, "host"), append(reasonLabels, "host")
	}
	var err error
	if m.requests, err = register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "retryhttp_requests_total",
		Help: "Logical requests (RoundTrip calls) by method and final outcome.",
	}, requestLabels)); err != nil {
		return nil, err
	}
	if m.attempts, err = register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "retryhttp_attempts_total",
		Help: "Attempts sent, by attempt number (1 is the first send).",
	}, []string{"attempt"})); err != nil {
		return nil, err
	}
	if m.retries, err = register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "retryhttp_retries_total",
		Help: "Retries scheduled, by trigger: the status code, network or timeout.",
	}, reasonLabels)); err != nil {
		return nil, err
	}
	if m.giveUps, err = register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "retryhttp_give_ups_total",
		Help: "Retryable failures that were not retried, by reason.",
	}, reasonLabels)); err != nil {
		return nil, err
	}
	if m.perRequest, err = register(reg, prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "retryhttp_attempts_per_request",
		Help:    "Attempts sent per logical request.",
		Buckets: prometheus.LinearBuckets(1, 1, 10),
	})); err != nil {
		return nil, err
	}
	if m.backoff, err = register(reg, prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "retryhttp_backoff_seconds",
		Help:    "Waits before retries, Retry-After included.",
		Buckets: prometheus.ExponentialBuckets(0.005, 2, 14),
	})); err != nil {
		return nil, err
	}
	if m.circuits, err = register(reg, &circuitCollector{breakers: map[*Breaker]bool{}}); err != nil {
		return nil, err
	}
	if m.hosts == nil {
		for i, method := range methods {
			for j, outcome := range outcomes {
				m.requestsHot[i][j] = m.requests.WithLabelValues(method, outcome)
			}
		}
	}
	for i := range m.attemptsHot {
		m.attemptsHot[i] = m.attempts.WithLabelValues(attemptLabel(i + 1))
	}
	return m, nil
}

// register registers c, or returns the collector of the same description
// already registered.
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
		return c, fmt.Errorf("retryhttp: NewMetrics: a different collector is registered under the same name: %w", err)
	}
	return c, fmt.Errorf("retryhttp: NewMetrics: %w", err)
}

func attemptLabel(n int) string {
	if n >= 10 {
		return "10+"
	}
	return strconv.Itoa(n)
}

func (m *Metrics) attempt(n int) {
	if m == nil {
		return
	}
	m.attemptsHot[min(n, 10)-1].Inc()
}

func (m *Metrics) retry(u *url.URL, trigger string, wait float64) {
	if m == nil {
		return
	}
	if m.hosts != nil {
		m.retries.WithLabelValues(trigger, m.hosts.label(u)).Inc()
	} else {
		m.retries.WithLabelValues(trigger).Inc()
	}
	m.backoff.Observe(wait)
}

func (m *Metrics) request(u *url.URL, method, outcome string, attempts int) {
	if m == nil {
		return
	}
	j := outcomeIndex(outcome)
	if attempts > 0 {
		m.perRequest.Observe(float64(attempts))
	}
	if m.hosts != nil {
		host := m.hosts.label(u)
		m.requests.WithLabelValues(methods[methodIndex(method)], outcome, host).Inc()
		if j > outcomeIndex(outcomeCanceled) {
			m.giveUps.WithLabelValues(outcome, host).Inc()
		}
		return
	}
	if j >= 0 {
		m.requestsHot[methodIndex(method)][j].Inc()
	}
	if j > outcomeIndex(outcomeCanceled) {
		m.giveUps.WithLabelValues(outcome).Inc()
	}
}

// track adds b's circuits to the circuit_state gauge.
func (m *Metrics) track(b *Breaker) {
	if m == nil || b == nil {
		return
	}
	m.circuits.mu.Lock()
	m.circuits.breakers[b] = true
	m.circuits.mu.Unlock()
}

// circuitCollector reports the state of every circuit of the tracked
// breakers when scraped, so the gauge shows an open period that has ended as
// half-open without any request having to pass.
type circuitCollector struct {
	mu       sync.Mutex
	breakers map[*Breaker]bool // guarded by mu
}

var circuitDesc = prometheus.NewDesc("retryhttp_circuit_state",
	"Circuit state per host: 0 closed, 1 half-open, 2 open.", []string{"host"}, nil)

func (c *circuitCollector) Describe(ch chan<- *prometheus.Desc) { ch <- circuitDesc }

func (c *circuitCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	breakers := make([]*Breaker, 0, len(c.breakers))
	for b := range c.breakers {
		breakers = append(breakers, b)
	}
	c.mu.Unlock()
	for _, b := range breakers {
		for host, s := range b.states() {
			ch <- prometheus.MustNewConstMetric(circuitDesc, prometheus.GaugeValue, float64(s), host)
		}
	}
}

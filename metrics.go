package retryhttp

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"weak"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/retryhttp/retryhttp/internal/promreg"
)

// Metrics counts what Transports do, in Prometheus collectors registered on
// the Registerer given to NewMetrics. A nil *Metrics counts nothing and
// costs nothing. One *Metrics may be shared by several Transports, and
// NewMetrics called twice on one registry returns collectors that share the
// registered series, so two Transports built apart still add up.
//
// Series (labels are bounded: methods outside the standard set are
// "unknown", attempts past 9 are "10+"); each appears when first used:
//
//	retryhttp_requests_total{method,outcome}   logical requests (RoundTrip calls) by final outcome
//	retryhttp_attempts_total{attempt}          attempts sent, by number (1 = first send), counted when the request ends
//	retryhttp_retries_total{trigger}           retries scheduled, by trigger: a status of DefaultRetryStatuses,
//	                                           "network", "timeout", or "other" for any other status
//	retryhttp_give_ups_total{reason}           retryable failures not retried, by each Reason that GaveUp:
//	                                           attempts, elapsed, deadline, retry_after_too_long, budget,
//	                                           circuit_open, body, throttled, limited, paced
//	retryhttp_attempts_per_request             histogram, buckets 1..10, of the requests that sent at least one
//	                                           attempt: one refused before its first send (by a brake: the
//	                                           Pacer, the Limit, the Throttle, the Breaker) is in requests_total only,
//	                                           so the two counts differ
//	retryhttp_backoff_seconds                  histogram of the waits before retries
//	retryhttp_circuit_state{host}              0 closed, 1 half-open, 2 open, per host of the Breakers in use
//	retryhttp_stacked_retries_total{signal}    requests sent once because a layer above retries them: retryhttp,
//	                                           idempotency_key, operation, amz_sdk_request, stainless, google
//	retryhttp_hedges_total                     hedges sent (see Hedging); present from the start, as 0
//	retryhttp_hedges_won_total                 hedges whose response was the one returned
//	retryhttp_replayed_responses_total         responses marked Idempotent-Replayed: true by the server's
//	                                           idempotency layer (a stored answer, not a new effect)
//
// Outcomes: success (a final status below 400), status (a final status of
// 400 or more that was not retried), error (an error that was not retried),
// canceled (the caller's context ended), before_attempt (BeforeAttempt
// stopped it), and each give-up reason.
//
// MetricsOptions.HostLabel adds a host label (scheme://host:port) to
// requests_total, retries_total and give_ups_total.
type Metrics struct {
	requests *prometheus.CounterVec // with a host label only; otherwise the hot counters
	retries  *prometheus.CounterVec
	giveUps  *prometheus.CounterVec
	backoff  prometheus.Histogram
	stacked  *prometheus.CounterVec
	hedges   prometheus.Counter
	won      prometheus.Counter
	replayed prometheus.Counter
	shared   *registryState
}

// MetricsOptions configure NewMetrics. The zero value is the default.
type MetricsOptions struct {
	// HostLabel, if positive, adds a host label (scheme://host:port) to
	// requests_total, retries_total and give_ups_total, for at most that
	// many distinct hosts per registry; requests to any further host are
	// labelled "other", so a client that calls many hosts cannot grow the
	// series without bound. 0, the default, adds none: a label per host
	// multiplies the series, and each labelled update costs a lookup.
	HostLabel int
}

// hostLabels hands out the host label of a URL, bounded.
type hostLabels struct {
	max  int
	seen sync.Map // hostID -> string
	mu   sync.Mutex
	n    int // labels handed out; guarded by mu
}

// otherHost labels the hosts past HostLabel's bound.
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

// Outcomes of a logical request, the outcome label of requests_total: what
// ReasonNotRetryable returned, then the labels of the later reasons.
const (
	outcomeSuccess = "success"
	outcomeStatus  = "status"
	outcomeError   = "error"
)

var outcomes = func() (o [3 + len(reasons) - int(ReasonCanceled)]string) {
	copy(o[:], []string{outcomeSuccess, outcomeStatus, outcomeError})
	for r := ReasonCanceled; int(r) < len(reasons); r++ {
		o[3+int(r-ReasonCanceled)] = r.String()
	}
	return o
}()

// outcomeOf names how a RoundTrip ended, as Event.Outcome and the outcome
// label of retryhttp_requests_total do. ReasonNone and ReasonNotRetryable
// name no stop of their own.
func outcomeOf(resp *http.Response, err error, reason Reason) string {
	if reason < ReasonCanceled || reason >= numReasons {
		reason = ReasonNotRetryable
	}
	return outcomes[outcomeIndex(resp, err, reason)]
}

// outcomeIndex places a request's end in outcomes.
func outcomeIndex(resp *http.Response, err error, reason Reason) int {
	switch {
	case reason != ReasonNotRetryable:
		return 3 + int(reason-ReasonCanceled)
	case err != nil:
		return 2
	case resp.StatusCode < 400:
		return 0
	}
	return 1
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

// NewMetrics creates the collectors and registers them on reg. It never
// touches the global registry unless reg is prometheus.DefaultRegisterer.
// If reg already holds retryhttp collectors with the same labels, they are
// reused; with other labels (one NewMetrics with a HostLabel, one
// without), or another host bound, it is an error.
func NewMetrics(reg prometheus.Registerer, opts MetricsOptions) (*Metrics, error) {
	if reg == nil {
		return nil, errors.New("retryhttp: NewMetrics: nil Registerer")
	}
	c := struct{ maxHosts int }{opts.HostLabel}
	if c.maxHosts < 0 {
		return nil, fmt.Errorf("retryhttp: NewMetrics: HostLabel %d: the bound must be positive", c.maxHosts)
	}
	m := &Metrics{}
	var err error
	state := &registryState{maxHosts: c.maxHosts, breakers: map[weak.Pointer[Breaker]]struct{}{},
		retries: make([]atomic.Pointer[prometheus.Counter], len(triggerValues))}
	if c.maxHosts > 0 {
		state.hosts = &hostLabels{max: c.maxHosts}
	}
	if m.shared, err = register(reg, state); err != nil {
		return nil, err
	}
	if m.shared.maxHosts != c.maxHosts {
		return nil, fmt.Errorf("retryhttp: NewMetrics: HostLabel %d differs from the %d already registered on this registry", c.maxHosts, m.shared.maxHosts)
	}
	triggerLabels, reasonLabels := []string{"trigger"}, []string{"reason"}
	if c.maxHosts > 0 {
		triggerLabels, reasonLabels = append(triggerLabels, "host"), append(reasonLabels, "host")
		if m.requests, err = register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "retryhttp_requests_total",
			Help: requestsHelp,
		}, []string{"method", "outcome", "host"})); err != nil {
			return nil, err
		}
	}
	if m.retries, err = register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "retryhttp_retries_total",
		Help: "Retries scheduled, by trigger: the status code, network or timeout.",
	}, triggerLabels)); err != nil {
		return nil, err
	}
	if m.giveUps, err = register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "retryhttp_give_ups_total",
		Help: "Retryable failures that were not retried, by reason.",
	}, reasonLabels)); err != nil {
		return nil, err
	}
	if m.backoff, err = register(reg, prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "retryhttp_backoff_seconds",
		Help:    "Waits before retries, Retry-After included.",
		Buckets: prometheus.ExponentialBuckets(0.005, 2, 14),
	})); err != nil {
		return nil, err
	}
	if m.stacked, err = register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "retryhttp_stacked_retries_total",
		Help: "Requests sent once, without retries, because a layer above retries them, by the signal that showed it.",
	}, []string{"signal"})); err != nil {
		return nil, err
	}
	if m.hedges, err = register(reg, prometheus.NewCounter(prometheus.CounterOpts{
		Name: "retryhttp_hedges_total",
		Help: "Hedges sent: copies of a slow request sent before it answered (see Hedging).",
	})); err != nil {
		return nil, err
	}
	if m.won, err = register(reg, prometheus.NewCounter(prometheus.CounterOpts{
		Name: "retryhttp_hedges_won_total",
		Help: "Hedges whose response was the one returned, the other copies cancelled.",
	})); err != nil {
		return nil, err
	}
	if m.replayed, err = register(reg, prometheus.NewCounter(prometheus.CounterOpts{
		Name: "retryhttp_replayed_responses_total",
		Help: "Responses the server marked Idempotent-Replayed: a stored answer to a key sent before, not a new effect.",
	})); err != nil {
		return nil, err
	}
	return m, nil
}

// register is promreg.Register with this package's error prefix.
func register[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	c, err := promreg.Register(reg, c)
	if err != nil {
		err = fmt.Errorf("retryhttp: NewMetrics: %w", err)
	}
	return c, err
}

func attemptLabel(n int) string {
	if n >= 10 {
		return "10+"
	}
	return strconv.Itoa(n)
}

// triggerValues are the trigger label's values: network, timeout, each
// status of DefaultRetryStatuses, and other, last. triggerSlot gives a
// trigger's index in them.
var triggerValues, triggerSlots = func() ([]string, map[Trigger]int) {
	labels := []string{string(TriggerNetwork), string(TriggerTimeout)}
	for _, s := range defaultRetryStatuses {
		labels = append(labels, string(statusTrigger(s)))
	}
	labels = append(labels, triggerOther)
	slots := make(map[Trigger]int, len(labels))
	for i, l := range labels[:len(labels)-1] {
		slots[Trigger(l)] = i
	}
	return labels, slots
}()

// triggerSlot bounds the trigger label: a server that asks for retries
// of any status it likes (X-Should-Retry: true, a ShouldRetry hook, a
// custom RetryStatuses) must not create a series per status. The default
// statuses, network and timeout keep their names; the rest are "other".
func triggerSlot(t Trigger) int {
	if i, ok := triggerSlots[t]; ok {
		return i
	}
	return len(triggerValues) - 1
}

// triggerOther is the trigger label of a retried status outside
// DefaultRetryStatuses.
const triggerOther = "other"

func (m *Metrics) retry(u *url.URL, trigger Trigger, wait time.Duration) {
	if m == nil {
		return
	}
	i := triggerSlot(trigger)
	if m.shared.hosts != nil {
		m.retries.WithLabelValues(triggerValues[i], m.shared.hosts.label(u)).Inc()
	} else {
		m.shared.retryCounter(m.retries, i).Inc()
	}
	m.backoff.Observe(wait.Seconds())
}

// countDone counts the end o of a RoundTrip of the caller's req, and
// whether its response is a replay. It is EventDone's part of OnEvent, and
// what the Transport calls in its place (see doneCounter).
func (m *Metrics) countDone(req *http.Request, o ending, replay bool) {
	if m == nil {
		return
	}
	if replay {
		m.replayed.Inc()
	}
	reason, attempts := o.reason, o.attempts
	i, j := methodIndex(req.Method), outcomeIndex(o.resp, o.err, reason)
	sh := m.shared.hot.shard()
	// The request's attempts are counted with it, when it ends, in one
	// counter of one shard: the attempts by number and their sum are
	// derived from these when scraped (see collect).
	switch {
	case attempts > 10:
		sh.over.Add(1)
		sh.overExtra.Add(uint64(attempts - 9))
	case attempts > 0:
		sh.perRequest[attempts-1].Add(1)
	}
	if m.requests != nil { // a host label
		host := m.shared.hosts.label(req.URL)
		m.requests.WithLabelValues(methods[i], outcomes[j], host).Inc()
		if reason.GaveUp() {
			m.giveUps.WithLabelValues(reason.String(), host).Inc()
		}
		return
	}
	sh.requests[i][j].Add(1)
	if reason.GaveUp() {
		m.giveUps.WithLabelValues(reason.String()).Inc()
	}
}

func (m *Metrics) stackedRetry(signal string) {
	if m != nil {
		m.stacked.WithLabelValues(signal).Inc()
	}
}

// registryState is what the Metrics of one registry share, found again by
// every NewMetrics on it: the host label bound, and the Breakers whose
// circuits the circuit_state gauge reports. It holds them weakly, so a
// short-lived Transport's Breaker is not kept alive by the metrics, and
// reports one series per host however many Breakers track it: the worst
// state among them.
type registryState struct {
	maxHosts int
	hosts    *hostLabels                          // nil without a host label
	hot      hotCounters                          // the counters every request touches
	retries  []atomic.Pointer[prometheus.Counter] // retries_total's children by triggerSlot, without a host label; see retryCounter

	mu       sync.Mutex
	breakers map[weak.Pointer[Breaker]]struct{} // guarded by mu
	live     int                                // breakers alive at the last prune; guarded by mu
}

var (
	circuitDesc = prometheus.NewDesc("retryhttp_circuit_state",
		"Circuit state per host: 0 closed, 1 half-open, 2 open (the worst among the Breakers in use).", []string{"host"}, nil)
	requestsDesc   = prometheus.NewDesc("retryhttp_requests_total", requestsHelp, []string{"method", "outcome"}, nil)
	attemptsDesc   = prometheus.NewDesc("retryhttp_attempts_total", "Attempts sent, by attempt number (1 is the first send).", []string{"attempt"}, nil)
	perRequestDesc = prometheus.NewDesc("retryhttp_attempts_per_request", "Attempts sent per logical request that sent at least one.", nil, nil)
)

const requestsHelp = "Logical requests (RoundTrip calls) by method and final outcome."

// retryCounter returns retries_total's child for trigger label slot i:
// found in vec the first time, then kept, so that a retry costs an atomic
// add and not a hash of its label and a lookup. A child is made only once
// a retry needs it, so the series appear as they did.
func (s *registryState) retryCounter(vec *prometheus.CounterVec, i int) prometheus.Counter {
	if c := s.retries[i].Load(); c != nil {
		return *c
	}
	c := vec.WithLabelValues(triggerValues[i])
	s.retries[i].Store(&c)
	return c
}

func (s *registryState) Describe(ch chan<- *prometheus.Desc) {
	ch <- circuitDesc
	ch <- attemptsDesc
	ch <- perRequestDesc
	if s.hosts == nil {
		ch <- requestsDesc
	}
}

func (s *registryState) track(b *Breaker) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.breakers[weak.Make(b)] = struct{}{}
	if len(s.breakers) > 2*s.live+64 {
		s.pruneLocked()
	}
}

// pruneLocked drops the Breakers that were collected and returns the live
// ones. s.mu must be held.
func (s *registryState) pruneLocked() []*Breaker {
	live := make([]*Breaker, 0, len(s.breakers))
	for wp := range s.breakers {
		if b := wp.Value(); b != nil {
			live = append(live, b)
		} else {
			delete(s.breakers, wp)
		}
	}
	s.live = len(live)
	return live
}

func (s *registryState) Collect(ch chan<- prometheus.Metric) {
	s.hot.collect(ch, s.hosts == nil)
	s.mu.Lock()
	breakers := s.pruneLocked()
	s.mu.Unlock()
	worst := map[string]CircuitState{}
	for _, b := range breakers {
		b.eachState(func(host string, st CircuitState) {
			if cur, ok := worst[host]; !ok || st > cur {
				worst[host] = st
			}
		})
	}
	for host, st := range worst {
		ch <- prometheus.MustNewConstMetric(circuitDesc, prometheus.GaugeValue, float64(st), host)
	}
}

// hotCounters are the counters every request touches: requests by method
// and outcome, and by attempts sent (from which collect derives the
// attempts by number and the attempts-per-request histogram). Counting
// them in Prometheus collectors would make every request on every core
// write the same few cache lines; they are spread instead over shards, one
// picked at random per request, and summed when scraped. A series appears
// when it first counts something.
type hotCounters struct {
	shards [hotShards]hotShard
}

const hotShards = 8

type hotShard struct {
	requests   [len(methods)][len(outcomes)]atomic.Uint64
	perRequest [10]atomic.Uint64 // requests that sent 1, 2, ... 10 attempts
	over       atomic.Uint64     // requests that sent more than 10
	overExtra  atomic.Uint64     // their attempts past the ninth: what attempt "10" counts of them
	_          [64]byte          // keep the next shard off this one's last line
}

// shard picks a shard for one request: at random, from the runtime's
// per-thread generator, so that goroutines on different cores mostly write
// different shards.
func (h *hotCounters) shard() *hotShard { return &h.shards[rand.Uint32()%hotShards] }

// collect sends the sums of the shards; requests only when no host label
// takes them over. The attempts by number are derived from the requests
// by attempts sent: attempt n was sent by every request that sent n or
// more, and attempt "10" counts each attempt past the ninth. Every series
// is a sum of counters, so it never decreases between scrapes.
func (h *hotCounters) collect(ch chan<- prometheus.Metric, requests bool) {
	var req [len(methods)][len(outcomes)]uint64
	var per [10]uint64
	var over, overExtra uint64
	for i := range h.shards {
		sh := &h.shards[i]
		for m := range req {
			for o := range req[m] {
				req[m][o] += sh.requests[m][o].Load()
			}
		}
		for n := range per {
			per[n] += sh.perRequest[n].Load()
		}
		over += sh.over.Load()
		overExtra += sh.overExtra.Load()
	}
	if requests {
		for m := range req {
			for o, v := range req[m] {
				if v > 0 {
					ch <- prometheus.MustNewConstMetric(requestsDesc, prometheus.CounterValue, float64(v), methods[m], outcomes[o])
				}
			}
		}
	}
	var att [10]uint64
	att[9] = per[9] + overExtra
	for n, sent := 8, per[9]+over; n >= 0; n-- { // sent: the requests that sent more than n+1
		att[n] = per[n] + sent
		sent += per[n]
	}
	for n, v := range att {
		if v > 0 {
			ch <- prometheus.MustNewConstMetric(attemptsDesc, prometheus.CounterValue, float64(v), attemptLabel(n+1))
		}
	}
	// Buckets 1 to 10, cumulative: the requests that sent at most that many
	// attempts; those that sent more count only in the total.
	count, sum := over, overExtra+9*over
	buckets := make(map[float64]uint64, 10)
	for n, v := range per {
		count += v
		sum += uint64(n+1) * v
		buckets[float64(n+1)] = count - over
	}
	if count > 0 {
		ch <- prometheus.MustNewConstHistogram(perRequestDesc, count, float64(sum), buckets)
	}
}

package retryhttp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// scrape fetches reg's exposition over a real HTTP handler and parses it,
// as Prometheus would.
func scrape(t *testing.T, reg *prometheus.Registry) map[string]*dto.MetricFamily {
	t.Helper()
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv.Close()
	req, _ := http.NewRequest("GET", srv.URL, nil)
	req.Header.Set("Accept", "text/plain")
	resp, err := srv.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	require.NoError(t, err)
	srv.Client().CloseIdleConnections()
	return fams
}

// value returns the value of the series of family name whose labels include
// all of want ("k=v" pairs); -1 when there is none.
func value(fams map[string]*dto.MetricFamily, name string, want ...string) float64 {
	f, ok := fams[name]
	if !ok {
		return -1
	}
series:
	for _, m := range f.Metric {
		labels := map[string]string{}
		for _, l := range m.Label {
			labels[l.GetName()] = l.GetValue()
		}
		for _, kv := range want {
			k, v, _ := strings.Cut(kv, "=")
			if labels[k] != v {
				continue series
			}
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue()
		case m.Gauge != nil:
			return m.Gauge.GetValue()
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount())
		}
	}
	return -1
}

func TestMetricsScraped(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg, MetricsOptions{})
	require.NoError(t, err)
	b, _ := NewBreaker(BreakerOptions{Failures: 2})

	// 503, 503, 200: one success after three attempts.
	tr := &Transport{Base: script(status(503), status(503), status(200)), Policy: noWait, Hooks: []Hook{m}}
	resp, err := tr.RoundTrip(newReq(t, "GET", "", nil))
	require.NoError(t, err)
	resp.Body.Close()
	// Always 503, two attempts: a give-up on attempts.
	tr2 := &Transport{Base: script(status(503)), Policy: Policy{MaxAttempts: 2, BaseDelay: time.Nanosecond}, Hooks: []Hook{m}, Breaker: b}
	resp, err = tr2.RoundTrip(newReq(t, "PUT", "", nil))
	require.NoError(t, err)
	resp.Body.Close()
	// Now the circuit is open: a fast failure.
	_, err = tr2.RoundTrip(newReq(t, "PUT", "", nil))
	require.ErrorIs(t, err, ErrCircuitOpen)
	// A 404, a network error that is not retried, an odd method.
	resp, err = (&Transport{Base: script(status(404)), Hooks: []Hook{m}}).RoundTrip(newReq(t, "BREW", "", nil))
	require.NoError(t, err)
	resp.Body.Close()
	_, err = (&Transport{Base: script(fail(errors.New("x"))), Hooks: []Hook{m}}).RoundTrip(newReq(t, "GET", "", nil))
	require.Error(t, err)

	f := scrape(t, reg)
	assert.Equal(t, 1.0, value(f, "retryhttp_requests_total", "method=GET", "outcome=success"))
	assert.Equal(t, 1.0, value(f, "retryhttp_requests_total", "method=PUT", "outcome=attempts"))
	assert.Equal(t, 1.0, value(f, "retryhttp_requests_total", "method=PUT", "outcome=circuit_open"))
	assert.Equal(t, 1.0, value(f, "retryhttp_requests_total", "method=unknown", "outcome=status"))
	assert.Equal(t, 1.0, value(f, "retryhttp_requests_total", "method=GET", "outcome=error"))
	assert.Equal(t, 4.0, value(f, "retryhttp_attempts_total", "attempt=1"))
	assert.Equal(t, 2.0, value(f, "retryhttp_attempts_total", "attempt=2"))
	assert.Equal(t, 1.0, value(f, "retryhttp_attempts_total", "attempt=3"))
	assert.Equal(t, -1.0, value(f, "retryhttp_attempts_total", "attempt=4"), "a series appears when first used")
	assert.Equal(t, 3.0, value(f, "retryhttp_retries_total", "trigger=503"))
	assert.Equal(t, 1.0, value(f, "retryhttp_give_ups_total", "reason=attempts"))
	assert.Equal(t, 1.0, value(f, "retryhttp_give_ups_total", "reason=circuit_open"))
	assert.Equal(t, 4.0, value(f, "retryhttp_attempts_per_request"), "the circuit-open request sent no attempt")
	assert.Equal(t, 3.0, value(f, "retryhttp_backoff_seconds"))
	assert.Equal(t, 2.0, value(f, "retryhttp_circuit_state", "host=http://api.test"))
	h := f["retryhttp_attempts_per_request"].Metric[0].Histogram
	assert.Equal(t, 3+2+1+1.0, h.GetSampleSum())
	// The gauge holds Breakers weakly: a collection before the scrape
	// would drop the series this test reads.
	runtime.KeepAlive(b)
}

func TestMetricsRegisterTwiceShares(t *testing.T) {
	reg := prometheus.NewRegistry()
	m1, err := NewMetrics(reg, MetricsOptions{})
	require.NoError(t, err)
	m2, err := NewMetrics(reg, MetricsOptions{})
	require.NoError(t, err)
	for _, m := range []*Metrics{m1, m2} {
		resp, err := (&Transport{Base: script(status(200)), Hooks: []Hook{m}}).RoundTrip(newReq(t, "GET", "", nil))
		require.NoError(t, err)
		resp.Body.Close()
	}
	assert.Equal(t, 2.0, value(scrape(t, reg), "retryhttp_requests_total", "method=GET", "outcome=success"))

	_, err = NewMetrics(nil, MetricsOptions{})
	assert.Error(t, err)
	clash := prometheus.NewRegistry()
	clash.MustRegister(prometheus.NewGauge(prometheus.GaugeOpts{Name: "retryhttp_requests_total", Help: "not ours"}))
	_, err = NewMetrics(clash, MetricsOptions{})
	assert.ErrorContains(t, err, "retryhttp: NewMetrics")
}

func TestCircuitGaugeTurnsHalfOpenWithTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := prometheus.NewRegistry()
		m, _ := NewMetrics(reg, MetricsOptions{})
		b, _ := NewBreaker(BreakerOptions{Failures: 1, OpenFor: time.Second})
		tr := &Transport{Base: script(status(503)), Policy: Policy{MaxAttempts: 1}, Hooks: []Hook{m}, Breaker: b}
		resp, err := tr.RoundTrip(newReq(t, "GET", "", nil))
		require.NoError(t, err)
		resp.Body.Close()
		fams := gather(t, reg)
		assert.Equal(t, 2.0, value(fams, "retryhttp_circuit_state", "host=http://api.test"))
		time.Sleep(2 * time.Second)
		assert.Equal(t, 1.0, value(gather(t, reg), "retryhttp_circuit_state", "host=http://api.test"))
		runtime.KeepAlive(b) // the gauge holds Breakers weakly: one collected has no series
	})
}

// gather reads the registry without HTTP, for use inside a synctest bubble
// (a loopback socket would keep the bubble from advancing).
func gather(t *testing.T, reg *prometheus.Registry) map[string]*dto.MetricFamily {
	fams, err := reg.Gather()
	require.NoError(t, err)
	out := map[string]*dto.MetricFamily{}
	for _, f := range fams {
		out[f.GetName()] = f
	}
	return out
}

func TestLogsAndHook(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var buf bytes.Buffer
		logger := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
		var events []Event
		tr := &Transport{
			Base:                 script(retryAfter(503, "1"), fail(errReset), status(503)),
			Policy:               Policy{MaxAttempts: 3, BaseDelay: 100 * time.Millisecond, Jitter: JitterNone},
			InjectIdempotencyKey: true,
			Logger:               logger,
			Hooks:                []Hook{retryHook(func(e Event) { events = append(events, e) })},
		}
		req := newReq(t, "POST", "secret-body", http.Header{"Authorization": {"Bearer hunter2"}})
		resp, err := tr.RoundTrip(req)
		require.NoError(t, err)
		resp.Body.Close()

		require.Len(t, events, 3)
		key := events[0].Request.Header.Get("Idempotency-Key")
		assert.NotEmpty(t, key, "the injected key is visible to hooks")
		assert.Equal(t, []int{1, 2, 3}, []int{events[0].Attempt, events[1].Attempt, events[2].Attempt})
		assert.Equal(t, []Trigger{"503", TriggerNetwork, "503"}, []Trigger{events[0].Trigger, events[1].Trigger, events[2].Trigger})
		assert.Equal(t, []time.Duration{time.Second, 200 * time.Millisecond}, []time.Duration{events[0].Wait, events[1].Wait})
		assert.Equal(t, ReasonAttempts, events[2].GiveUp)
		assert.NotNil(t, events[0].Response)
		assert.ErrorIs(t, events[1].Err, errReset)

		out := buf.String()
		for _, secret := range []string{"secret-body", "hunter2", "Bearer", "secret=1"} {
			assert.NotContains(t, out, secret)
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")
		require.Len(t, lines, 3)
		var rec []map[string]any
		for _, l := range lines {
			var m map[string]any
			require.NoError(t, json.Unmarshal([]byte(l), &m))
			rec = append(rec, m)
		}
		assert.Equal(t, "DEBUG", rec[0]["level"])
		assert.Equal(t, "retryhttp: retrying", rec[0]["msg"])
		assert.Equal(t, "POST", rec[0]["method"])
		assert.Equal(t, "api.test", rec[0]["host"])
		assert.Equal(t, "/things", rec[0]["path"])
		assert.Equal(t, key, rec[0]["idempotency_key"])
		assert.Equal(t, "503", rec[0]["trigger"])
		assert.Equal(t, 503.0, rec[0]["status"])
		assert.Equal(t, "1s", rec[0]["wait"], "durations as people read them")
		assert.Equal(t, "200ms", rec[1]["wait"])
		assert.Equal(t, "WARN", rec[2]["level"])
		assert.Equal(t, "attempts", rec[2]["give_up"])
	})
}

func TestMetricsIndexTables(t *testing.T) {
	for i, m := range methods {
		assert.Equal(t, i, methodIndex(m), m)
	}
	assert.Equal(t, 0, methodIndex(""))
	assert.Equal(t, len(methods)-1, methodIndex("BREW"))
	ok := &http.Response{StatusCode: 200}
	assert.Equal(t, outcomeSuccess, outcomes[outcomeIndex(ok, nil, ReasonNotRetryable)])
	assert.Equal(t, outcomeStatus, outcomes[outcomeIndex(&http.Response{StatusCode: 404}, nil, ReasonNotRetryable)])
	assert.Equal(t, outcomeError, outcomes[outcomeIndex(nil, errReset, ReasonNotRetryable)])
	for r := ReasonCanceled; int(r) < len(reasons); r++ {
		assert.Equal(t, r.String(), outcomes[outcomeIndex(ok, nil, r)], "every later reason is an outcome")
	}
	assert.Len(t, outcomes, 3+len(reasons)-int(ReasonCanceled))
}

// A POST-only client exposes POST series only: series appear when used.
func TestMetricsSeriesAppearWhenUsed(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg, MetricsOptions{})
	require.NoError(t, err)
	resp, err := (&Transport{Base: script(status(201)), Hooks: []Hook{m}}).RoundTrip(newReq(t, "POST", "x", nil))
	require.NoError(t, err)
	resp.Body.Close()
	f := scrape(t, reg)
	require.Len(t, f["retryhttp_requests_total"].Metric, 1)
	assert.Equal(t, 1.0, value(f, "retryhttp_requests_total", "method=POST", "outcome=success"))
	require.Len(t, f["retryhttp_attempts_total"].Metric, 1)
	assert.Nil(t, f["retryhttp_give_ups_total"], "no give-up, no series")
}

func TestMetricsHostLabel(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg, MetricsOptions{HostLabel: 2})
	require.NoError(t, err)
	for _, u := range []string{"http://a.test/x", "http://a.test:80/y", "https://b.test/", "http://c.test/", "http://d.test/"} {
		req, _ := http.NewRequest("GET", u, nil)
		resp, err := (&Transport{Base: script(status(503), status(200)), Policy: noWait, Hooks: []Hook{m}}).RoundTrip(req)
		require.NoError(t, err)
		resp.Body.Close()
	}
	f := scrape(t, reg)
	assert.Equal(t, 2.0, value(f, "retryhttp_requests_total", "host=http://a.test", "outcome=success"))
	assert.Equal(t, 1.0, value(f, "retryhttp_requests_total", "host=https://b.test", "outcome=success"))
	assert.Equal(t, 2.0, value(f, "retryhttp_requests_total", "host=other", "outcome=success"), "hosts past the bound")
	assert.Equal(t, 2.0, value(f, "retryhttp_retries_total", "host=other", "trigger=503"))
	assert.Equal(t, -1.0, value(f, "retryhttp_requests_total", "host=http://c.test"))

	_, err = NewMetrics(reg, MetricsOptions{}) // same names, other labels
	assert.ErrorContains(t, err, "retryhttp: NewMetrics")
	_, err = NewMetrics(prometheus.NewRegistry(), MetricsOptions{HostLabel: -1})
	assert.ErrorContains(t, err, "must be positive")
	shared, err := NewMetrics(reg, MetricsOptions{HostLabel: 2})
	require.NoError(t, err, "same labels: shared")
	assert.NotNil(t, shared)
}

// Two Breakers tracking one host on one Metrics: the scrape still works
// (one series per host, the worst state), instead of failing with a
// duplicate series.
func TestCircuitGaugeTwoBreakersOneHost(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg, MetricsOptions{})
	require.NoError(t, err)
	open, _ := NewBreaker(BreakerOptions{Failures: 1})
	closed, _ := NewBreaker(BreakerOptions{Failures: 5})
	for _, b := range []*Breaker{open, closed} {
		tr := &Transport{Base: script(status(503)), Policy: Policy{MaxAttempts: 1}, Hooks: []Hook{m}, Breaker: b}
		resp, err := tr.RoundTrip(newReq(t, "GET", "", nil))
		require.NoError(t, err)
		resp.Body.Close()
	}
	_, err = reg.Gather()
	require.NoError(t, err, "the scrape must not fail")
	f := gather(t, reg)
	require.Len(t, f["retryhttp_circuit_state"].Metric, 1)
	assert.Equal(t, 2.0, value(f, "retryhttp_circuit_state", "host=http://api.test"), "the worst state")
	// The gauge holds Breakers weakly: without this, a collection before
	// the scrape may take them, and the scrape would have nothing to say.
	runtime.KeepAlive(open)
	runtime.KeepAlive(closed)
}

// Short-lived Transports, each with its own Breaker, on one long-lived
// Metrics: the Metrics does not keep them alive.
func TestCircuitGaugeForgetsCollectedBreakers(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg, MetricsOptions{})
	require.NoError(t, err)
	keep, _ := NewBreaker(BreakerOptions{})
	for i := range 5000 {
		b, _ := NewBreaker(BreakerOptions{})
		if i == 0 {
			b = keep
		}
		tr := &Transport{Base: script(status(200)), Hooks: []Hook{m}, Breaker: b}
		resp, err := tr.RoundTrip(newReq(t, "GET", "", nil))
		require.NoError(t, err)
		resp.Body.Close()
	}
	runtime.GC()
	runtime.GC()
	_, err = reg.Gather() // prunes
	require.NoError(t, err)
	m.shared.mu.Lock()
	n := len(m.shared.breakers)
	m.shared.mu.Unlock()
	assert.LessOrEqual(t, n, 2, "collected Breakers are dropped; the one still referenced stays")
	assert.GreaterOrEqual(t, n, 1)
	runtime.KeepAlive(keep)
}

// The host label bound is per registry: two NewMetrics on one registry
// share it instead of doubling it.
func TestHostLabelBoundPerRegistry(t *testing.T) {
	reg := prometheus.NewRegistry()
	m1, err := NewMetrics(reg, MetricsOptions{HostLabel: 2})
	require.NoError(t, err)
	m2, err := NewMetrics(reg, MetricsOptions{HostLabel: 2})
	require.NoError(t, err)
	for i, u := range []string{"http://a.test/", "http://b.test/", "http://c.test/", "http://d.test/"} {
		m := []*Metrics{m1, m2}[i%2]
		req, _ := http.NewRequest("GET", u, nil)
		resp, err := (&Transport{Base: script(status(200)), Hooks: []Hook{m}}).RoundTrip(req)
		require.NoError(t, err)
		resp.Body.Close()
	}
	f := scrape(t, reg)
	assert.Equal(t, 2.0, value(f, "retryhttp_requests_total", "host=other"), "c and d are past the shared bound of 2")
	_, err = NewMetrics(reg, MetricsOptions{HostLabel: 3})
	assert.ErrorContains(t, err, "differs")
}

// A server that asks for retries of any status it likes (X-Should-Retry:
// true) adds one series, "other", however many statuses it sends.
func TestTriggerLabelIsBounded(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg, MetricsOptions{})
	require.NoError(t, err)
	var n atomic.Int32
	base := roundTripFunc(func(req *http.Request) (*http.Response, error) {
		i := int(n.Add(1))
		if i%2 == 0 {
			return &http.Response{StatusCode: 200, Body: http.NoBody, Request: req}, nil
		}
		h := http.Header{"X-Should-Retry": {"true"}}
		return &http.Response{StatusCode: 440 + i/2, Header: h, Body: http.NoBody, Request: req}, nil
	})
	tr := &Transport{Base: base, Policy: noWait, Hooks: []Hook{m}, Budget: NoBudget}
	for range 50 {
		resp, err := tr.RoundTrip(newReq(t, "GET", "", nil))
		require.NoError(t, err)
		require.Equal(t, 200, resp.StatusCode)
		resp.Body.Close()
	}
	resp, err := (&Transport{Base: script(status(503), status(200)), Policy: noWait, Hooks: []Hook{m}}).RoundTrip(newReq(t, "GET", "", nil))
	require.NoError(t, err)
	resp.Body.Close()
	f := scrape(t, reg)
	assert.Len(t, f["retryhttp_retries_total"].Metric, 2, "50 statuses outside the defaults share one series")
	assert.Equal(t, 50.0, value(f, "retryhttp_retries_total", "trigger=other"))
	assert.Equal(t, 1.0, value(f, "retryhttp_retries_total", "trigger=503"))
}

// Outcome is the one naming of a request's end, the labels of
// requests_total.
func TestOutcome(t *testing.T) {
	ok, notFound := &http.Response{StatusCode: 200}, &http.Response{StatusCode: 404}
	for _, tc := range []struct {
		resp   *http.Response
		err    error
		reason Reason
		want   string
	}{
		{ok, nil, ReasonNotRetryable, "success"},
		{ok, nil, ReasonNone, "success"},
		{notFound, nil, ReasonNotRetryable, "status"},
		{nil, errors.New("x"), ReasonNotRetryable, "error"},
		{nil, errors.New("x"), ReasonCanceled, "canceled"},
		{notFound, nil, ReasonAttempts, "attempts"},
		{nil, ErrCircuitOpen, ReasonCircuitOpen, "circuit_open"},
		{ok, nil, Reason(200), "success"},
	} {
		assert.Equal(t, tc.want, outcomeOf(tc.resp, tc.err, tc.reason), "%v %v %v", tc.resp, tc.err, tc.reason)
	}
	for i, o := range outcomes {
		assert.NotEmpty(t, o, "outcome %d", i)
	}
}

// *Metrics counts a RoundTrip's end from its parts when it is the only
// kind of hook, and from the Event beside a hook of another kind: both
// ways count the same series, replays included.
func TestMetricsAloneCountAsBesideOtherHooks(t *testing.T) {
	expose := func(extra ...Hook) string {
		reg := prometheus.NewRegistry()
		m, err := NewMetrics(reg, MetricsOptions{})
		require.NoError(t, err)
		hooks := append([]Hook{m}, extra...)
		for _, base := range []*scriptBase{
			script(status(503), status(200)),
			script(step{status: 200, header: http.Header{"Idempotent-Replayed": {"true"}}}),
			script(status(503)),
			script(status(404)),
			script(fail(errors.New("x"))),
		} {
			tr := &Transport{Base: base, Policy: Policy{MaxAttempts: 2, BaseDelay: time.Nanosecond}, Hooks: hooks,
				Logger: slog.New(slog.DiscardHandler)}
			if resp, err := tr.RoundTrip(newReq(t, "POST", "", http.Header{"Idempotency-Key": {"k"}})); err == nil {
				resp.Body.Close()
			}
		}
		var out strings.Builder
		fams, err := reg.Gather()
		require.NoError(t, err)
		for _, f := range fams {
			_, err := expfmt.MetricFamilyToText(&out, f)
			require.NoError(t, err)
		}
		return out.String()
	}
	alone := expose()
	require.Contains(t, alone, `retryhttp_requests_total{method="POST",outcome="success"} 2`)
	require.Contains(t, alone, "retryhttp_replayed_responses_total 1")
	assert.Equal(t, alone, expose(HookFunc(func(context.Context, Event) {})))
}

// The attempts by number and the attempts-per-request histogram are
// derived from the requests by attempts sent when scraped: they hold what
// counting every attempt would, past ten attempts too ("10+" counts each
// attempt from the tenth on), and they only grow between scrapes.
func TestMetricsAttemptsDerivedWhenScraped(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg, MetricsOptions{})
	require.NoError(t, err)
	var want [11]float64 // by attempt number, 1 to 10+
	var sum float64
	var prev map[string]float64
	var done []int // the requests' attempts so far
	for _, n := range []int{1, 3, 10, 11, 25, 2, 1} {
		tr := &Transport{Base: script(status(503)), Policy: Policy{MaxAttempts: n, BaseDelay: time.Nanosecond, MaxDelay: time.Nanosecond}, Hooks: []Hook{m}}
		resp, err := tr.RoundTrip(newReq(t, "GET", "", nil))
		require.NoError(t, err)
		resp.Body.Close()
		for a := 1; a <= n; a++ {
			want[min(a, 10)]++
		}
		sum += float64(n)

		f := scrape(t, reg)
		now := map[string]float64{}
		for a := 1; a <= 10; a++ {
			got := value(f, "retryhttp_attempts_total", "attempt="+attemptLabel(a))
			if want[a] == 0 {
				assert.Equal(t, -1.0, got, "attempt %d: no series before it is sent", a)
				continue
			}
			assert.Equal(t, want[a], got, "attempt %s after a request of %d attempts", attemptLabel(a), n)
			now[attemptLabel(a)] = got
			assert.GreaterOrEqual(t, got, prev[attemptLabel(a)])
		}
		prev = now
		h := f["retryhttp_attempts_per_request"].Metric[0].Histogram
		assert.Equal(t, sum, h.GetSampleSum())
		done = append(done, n)
		assert.Equal(t, uint64(len(done)), h.GetSampleCount())
		require.Len(t, h.Bucket, 11) // 1 to 10, and +Inf
		for _, b := range h.Bucket {
			var le uint64
			for _, k := range done {
				if float64(k) <= b.GetUpperBound() {
					le++
				}
			}
			assert.Equal(t, le, b.GetCumulativeCount(), "bucket le=%v", b.GetUpperBound())
		}
	}
}

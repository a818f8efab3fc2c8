// Package retryhttpotel makes a retryhttp.Transport visible to
// OpenTelemetry: a span for each logical request with an event per retry
// decision, one client span per attempt (otelhttp's, placed under the
// Transport) carrying http.request.resend_count as the HTTP semantic
// conventions define it, and metrics equivalent to retryhttp's Prometheus
// ones.
//
//	t := &retryhttp.Transport{InjectIdempotencyKey: true}
//	if _, err := retryhttpotel.Instrument(t); err != nil { ... }
//	client := &http.Client{Transport: t}
//
// Instrument adds a retryhttp.Hook and changes no field of the Transport:
// the hook wraps each attempt in otelhttp, so each attempt is its own
// client span, child of the logical request's span, which the hook wraps
// around the whole RoundTrip; a single otelhttp span around the Transport
// would hide the retries inside one span. Instrumenting a Transport twice
// adds nothing the second time.
package retryhttpotel

import (
	"context"
	"errors"
	"net/http"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"weak"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/retryhttp/retryhttp"
)

// ScopeName is the instrumentation scope of the spans and metrics.
const ScopeName = "github.com/retryhttp/retryhttp/retryhttpotel"

// Attribute keys. http.request.resend_count is the semantic conventions'
// own; the rest name what the conventions do not have.
const (
	KeyResendCount = attribute.Key("http.request.resend_count")
	KeyAttempt     = attribute.Key("retryhttp.attempt")
	KeyTrigger     = attribute.Key("retryhttp.trigger")
	KeyWait        = attribute.Key("retryhttp.wait_seconds")
	KeyGiveUp      = attribute.Key("retryhttp.give_up")
	KeyOutcome     = attribute.Key("retryhttp.outcome")
	KeyAttempts    = attribute.Key("retryhttp.attempts")
	keyMethod      = attribute.Key("http.request.method")
)

// Option configures Instrument.
type Option interface{ apply(*config) }

type config struct {
	tp       trace.TracerProvider
	mp       metric.MeterProvider
	otelhttp []otelhttp.Option
}

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

// WithTracerProvider sets the TracerProvider; nil, or no
// WithTracerProvider, means the global one.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return optionFunc(func(c *config) {
		if tp != nil {
			c.tp = tp
		}
	})
}

// WithMeterProvider sets the MeterProvider; nil, or no WithMeterProvider,
// means the global one.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return optionFunc(func(c *config) {
		if mp != nil {
			c.mp = mp
		}
	})
}

// WithOtelHTTPOptions passes options to the otelhttp transport of the
// attempts (span names, filters, propagators).
func WithOtelHTTPOptions(opts ...otelhttp.Option) Option {
	return optionFunc(func(c *config) { c.otelhttp = append(c.otelhttp, opts...) })
}

// Instrument adds OpenTelemetry's hook to t and returns t, for use as the
// client's Transport. It changes no field of t, composes with t's other
// hooks (in the order they were added), and does nothing when t already
// has it. net/http's own resends inside one attempt
// are still counted by t (see retryhttp.Transport); the attempt spans show
// each attempt t made.
func Instrument(t *retryhttp.Transport, opts ...Option) (http.RoundTripper, error) {
	if t == nil {
		return nil, errors.New("retryhttpotel: Instrument: nil Transport")
	}
	c := config{tp: otel.GetTracerProvider(), mp: otel.GetMeterProvider()}
	for _, o := range opts {
		if o != nil {
			o.apply(&c)
		}
	}
	m, err := newMetrics(c.mp.Meter(ScopeName))
	if err != nil {
		return nil, err
	}
	key := weak.Make(t)
	if _, had := instrumented.LoadOrStore(key, struct{}{}); had {
		return t, nil
	}
	runtime.AddCleanup(t, func(k weak.Pointer[retryhttp.Transport]) { instrumented.Delete(k) }, key)
	t.AddHook(&hook{
		tracer:   c.tp.Tracer(ScopeName),
		m:        m,
		httpOpts: append([]otelhttp.Option{otelhttp.WithTracerProvider(c.tp), otelhttp.WithMeterProvider(c.mp)}, c.otelhttp...),
	})
	return t, nil
}

// instrumented holds the Transports Instrument added its hook to, weakly,
// so that a second Instrument does nothing and a Transport's entry goes
// with it.
var instrumented sync.Map // weak.Pointer[retryhttp.Transport] → struct{}

// hook is OpenTelemetry's retryhttp.Hook.
type hook struct {
	tracer   trace.Tracer
	m        *metrics
	httpOpts []otelhttp.Option
}

func (h *hook) WrapRoundTrip(next http.RoundTripper) http.RoundTripper {
	return &requests{next: next, tracer: h.tracer, m: h.m}
}

func (h *hook) WrapAttempt(next http.RoundTripper) http.RoundTripper {
	return otelhttp.NewTransport(&attempts{base: next, m: h.m}, h.httpOpts...)
}

func (h *hook) OnEvent(ctx context.Context, e retryhttp.Event) {
	switch e.Kind {
	case retryhttp.EventRetry, retryhttp.EventGiveUp:
		retryEvent(e, h.m)
	case retryhttp.EventDone:
		if st := stateFrom(ctx); st != nil {
			st.outcome = e.Outcome
		}
	}
}

// state is what the layers of one logical request share through its
// context.
type state struct {
	attempts atomic.Int64
	outcome  string // EventDone's, set on the RoundTrip's goroutine before it returns
}

type stateKey struct{}

func stateFrom(ctx context.Context) *state {
	s, _ := ctx.Value(stateKey{}).(*state)
	return s
}

// requests is the outermost layer: a span per logical request, and its
// outcome counted.
type requests struct {
	next   http.RoundTripper
	tracer trace.Tracer
	m      *metrics
}

func (r *requests) RoundTrip(req *http.Request) (*http.Response, error) {
	method := req.Method
	if method == "" {
		method = http.MethodGet
	}
	st := &state{}
	ctx, span := r.tracer.Start(context.WithValue(req.Context(), stateKey{}, st), "retryhttp "+method,
		trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(keyMethod.String(method)))
	defer span.End()
	resp, err := r.next.RoundTrip(req.WithContext(ctx))
	outcome := st.outcome
	if outcome == "" { // the Transport refused the request before its loop (a nil URL, an invalid Policy)
		outcome = "error"
	}
	n := st.attempts.Load()
	span.SetAttributes(KeyOutcome.String(outcome), KeyAttempts.Int64(n))
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
	}
	r.m.request(ctx, method, outcome, n)
	if resp != nil {
		resp.Request = req // the caller's, not our copy
	}
	return resp, err
}

// attempts is the layer under otelhttp: it sees each attempt inside its
// client span.
type attempts struct {
	base http.RoundTripper
	m    *metrics
}

func (a *attempts) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	n := retryhttp.AttemptFromContext(ctx)
	if n > 1 {
		// The conventions: the ordinal of the resend, set only on resends.
		trace.SpanFromContext(ctx).SetAttributes(KeyResendCount.Int(n - 1))
	}
	if st := stateFrom(ctx); st != nil {
		st.attempts.Add(1)
	}
	a.m.attempt(ctx, n)
	return a.base.RoundTrip(req)
}

// CloseIdleConnections reaches the base, so http.Client.CloseIdleConnections
// works through the stack.
func (a *attempts) CloseIdleConnections() {
	if c, ok := a.base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// retryEvent records a retry decision: an event on the logical request's
// span, and the counters.
func retryEvent(e retryhttp.Event, m *metrics) {
	ctx := e.Request.Context()
	attrs := []attribute.KeyValue{KeyAttempt.Int(e.Attempt)}
	if e.Trigger != "" {
		attrs = append(attrs, KeyTrigger.String(string(e.Trigger)))
	}
	name := "retryhttp.retry"
	if e.GiveUp != retryhttp.ReasonNone {
		name = "retryhttp.give_up"
		attrs = append(attrs, KeyGiveUp.String(e.GiveUp.String()))
		m.giveUp(ctx, e.GiveUp.String())
	} else {
		attrs = append(attrs, KeyWait.Float64(e.Wait.Seconds()))
		m.retry(ctx, string(e.Trigger), e.Wait.Seconds())
	}
	trace.SpanFromContext(ctx).AddEvent(name, trace.WithAttributes(attrs...))
}

// metrics are the OpenTelemetry instruments, named after the Prometheus
// series of retryhttp.NewMetrics.
type metrics struct {
	requests, attempts, retries, giveUps metric.Int64Counter
	perRequest, backoff                  metric.Float64Histogram
}

func newMetrics(meter metric.Meter) (*metrics, error) {
	m := &metrics{}
	var err error
	counter := func(name, desc string) metric.Int64Counter {
		if err != nil {
			return nil
		}
		var c metric.Int64Counter
		c, err = meter.Int64Counter(name, metric.WithDescription(desc))
		return c
	}
	m.requests = counter("retryhttp.requests", "Logical requests (RoundTrip calls) by method and final outcome.")
	m.attempts = counter("retryhttp.attempts", "Attempts sent, by attempt number (1 is the first send).")
	m.retries = counter("retryhttp.retries", "Retries scheduled, by trigger: the status code, network or timeout.")
	m.giveUps = counter("retryhttp.give_ups", "Retryable failures that were not retried, by reason.")
	if err != nil {
		return nil, err
	}
	if m.perRequest, err = meter.Float64Histogram("retryhttp.attempts_per_request", metric.WithDescription("Attempts sent per logical request."),
		metric.WithExplicitBucketBoundaries(1, 2, 3, 4, 5, 6, 7, 8, 9, 10)); err != nil {
		return nil, err
	}
	if m.backoff, err = meter.Float64Histogram("retryhttp.backoff", metric.WithUnit("s"), metric.WithDescription("Waits before retries, Retry-After included.")); err != nil {
		return nil, err
	}
	return m, nil
}

func (m *metrics) request(ctx context.Context, method, outcome string, attempts int64) {
	m.requests.Add(ctx, 1, metric.WithAttributes(keyMethod.String(method), KeyOutcome.String(outcome)))
	if attempts > 0 {
		m.perRequest.Record(ctx, float64(attempts))
	}
}

func (m *metrics) attempt(ctx context.Context, n int) {
	label := strconv.Itoa(n)
	if n >= 10 {
		label = "10+"
	}
	m.attempts.Add(ctx, 1, metric.WithAttributes(KeyAttempt.String(label)))
}

func (m *metrics) retry(ctx context.Context, trigger string, wait float64) {
	m.retries.Add(ctx, 1, metric.WithAttributes(KeyTrigger.String(trigger)))
	m.backoff.Record(ctx, wait)
}

func (m *metrics) giveUp(ctx context.Context, reason string) {
	m.giveUps.Add(ctx, 1, metric.WithAttributes(KeyGiveUp.String(reason)))
}

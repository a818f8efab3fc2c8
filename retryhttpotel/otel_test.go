package retryhttpotel_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/goleak"

	"github.com/retryhttp/retryhttp"
	"github.com/retryhttp/retryhttp/retryhttpotel"
	rt "github.com/retryhttp/retryhttp/retryhttptest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func attr(kvs []attribute.KeyValue, k attribute.Key) (attribute.Value, bool) {
	for _, kv := range kvs {
		if kv.Key == k {
			return kv.Value, true
		}
	}
	return attribute.Value{}, false
}

// One client span per attempt, each with http.request.resend_count on the
// resends, children of the logical request's span, which carries an event
// per retry decision; and the metrics.
func TestSpansAndMetrics(t *testing.T) {
	srv := rt.Start(t, rt.Script{"/": {rt.Status(503), rt.RetryAfter(429, "0"), rt.Status(200)}}, rt.Options{})
	sr := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr))
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	tr := &retryhttp.Transport{Base: srv.Transport(), Policy: retryhttp.Policy{BaseDelay: time.Millisecond, Jitter: retryhttp.JitterNone}}
	defer tr.CloseIdleConnections()
	rtp, err := retryhttpotel.Instrument(tr, retryhttpotel.WithTracerProvider(tp), retryhttpotel.WithMeterProvider(mp))
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest("GET", srv.URL+"/", nil)
	resp, err := (&http.Client{Transport: rtp}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Request != req {
		t.Fatalf("status %d, request %p (want the caller's %p)", resp.StatusCode, resp.Request, req)
	}

	var parent sdktrace.ReadOnlySpan
	var attemptSpans []sdktrace.ReadOnlySpan
	for _, s := range sr.Ended() {
		switch s.SpanKind() {
		case trace.SpanKindInternal:
			parent = s
		case trace.SpanKindClient:
			attemptSpans = append(attemptSpans, s)
		}
	}
	if parent == nil || len(attemptSpans) != 3 {
		t.Fatalf("%d attempt spans and parent %v, want 3 and one", len(attemptSpans), parent)
	}
	for i, s := range attemptSpans {
		if s.Parent().SpanID() != parent.SpanContext().SpanID() {
			t.Errorf("attempt span %d is not a child of the request's span", i+1)
		}
		v, ok := attr(s.Attributes(), retryhttpotel.KeyResendCount)
		switch {
		case i == 0 && ok:
			t.Errorf("the first attempt has resend_count %v; the conventions set it only on resends", v)
		case i > 0 && (!ok || v.AsInt64() != int64(i)):
			t.Errorf("attempt %d: resend_count %v, want %d", i+1, v, i)
		}
	}
	events := parent.Events()
	if len(events) != 2 || events[0].Name != "retryhttp.retry" {
		t.Fatalf("events %v, want two retry events", events)
	}
	if v, _ := attr(events[0].Attributes, retryhttpotel.KeyTrigger); v.AsString() != "503" {
		t.Errorf("first event trigger %v", v)
	}
	if v, _ := attr(events[1].Attributes, retryhttpotel.KeyTrigger); v.AsString() != "429" {
		t.Errorf("second event trigger %v", v)
	}
	if v, ok := attr(events[0].Attributes, retryhttpotel.KeyWait); !ok || v.AsFloat64() <= 0 {
		t.Errorf("first event wait %v", v)
	}
	if v, _ := attr(parent.Attributes(), retryhttpotel.KeyOutcome); v.AsString() != "success" {
		t.Errorf("outcome %v", v)
	}

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	sums := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != retryhttpotel.ScopeName {
			continue
		}
		for _, m := range sm.Metrics {
			if s, ok := m.Data.(metricdata.Sum[int64]); ok {
				for _, dp := range s.DataPoints {
					sums[m.Name] += dp.Value
				}
			}
		}
	}
	want := map[string]int64{"retryhttp.requests": 1, "retryhttp.attempts": 3, "retryhttp.retries": 2}
	for k, v := range want {
		if sums[k] != v {
			t.Errorf("%s = %d, want %d (all: %v)", k, sums[k], v, sums)
		}
	}
	tp.Shutdown(context.Background())
	mp.Shutdown(context.Background())
}

// A give-up is an event and an outcome.
func TestGiveUp(t *testing.T) {
	srv := rt.Start(t, rt.Script{"/": {rt.Status(503)}}, rt.Options{})
	sr := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr))
	tr := &retryhttp.Transport{Base: srv.Transport(), Policy: retryhttp.Policy{MaxAttempts: 2, BaseDelay: time.Millisecond}}
	defer tr.CloseIdleConnections()
	rtp, err := retryhttpotel.Instrument(tr, retryhttpotel.WithTracerProvider(tp))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := (&http.Client{Transport: rtp}).Get(srv.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	for _, s := range sr.Ended() {
		if s.SpanKind() != trace.SpanKindInternal {
			continue
		}
		if v, _ := attr(s.Attributes(), retryhttpotel.KeyOutcome); v.AsString() != "attempts" {
			t.Errorf("outcome %v, want attempts", v)
		}
		ev := s.Events()
		if len(ev) != 2 || ev[1].Name != "retryhttp.give_up" {
			t.Errorf("events %v", ev)
		}
	}
	tp.Shutdown(context.Background())
}

// Instrument changes no field of the Transport, is idempotent (a second
// hook would make a second request span), composes with the hooks of the
// Hooks field, and takes nil providers as the globals.
func TestInstrumentAttachesWithoutOverwriting(t *testing.T) {
	srv := rt.Start(t, rt.Script{"/": {rt.Status(503), rt.Status(200)}}, rt.Options{})
	sr := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr))
	base := srv.Transport()
	var seen int
	counter := retryhttp.HookFunc(func(_ context.Context, e retryhttp.Event) {
		if e.Kind == retryhttp.EventRetry {
			seen++
		}
	})
	tr := &retryhttp.Transport{Base: base, Policy: retryhttp.Policy{BaseDelay: time.Millisecond}, Hooks: []retryhttp.Hook{counter}}
	defer tr.CloseIdleConnections()
	for range 2 {
		if _, err := retryhttpotel.Instrument(tr, retryhttpotel.WithTracerProvider(tp), retryhttpotel.WithMeterProvider(nil)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := retryhttpotel.Instrument(&retryhttp.Transport{}, retryhttpotel.WithTracerProvider(nil)); err != nil {
		t.Fatal(err)
	}
	if tr.Base != base || len(tr.Hooks) != 1 {
		t.Fatal("Instrument changed a field of the Transport")
	}
	resp, err := (&http.Client{Transport: tr}).Get(srv.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	var requests, attempts int
	for _, s := range sr.Ended() {
		switch s.SpanKind() {
		case trace.SpanKindInternal:
			requests++
			if len(s.Events()) != 1 {
				t.Errorf("request span events %v, want one retry", s.Events())
			}
		case trace.SpanKindClient:
			attempts++
		}
	}
	if requests != 1 || attempts != 2 || seen != 1 {
		t.Fatalf("%d request spans, %d attempt spans, the field's hook told of %d retries; want 1, 2, 1", requests, attempts, seen)
	}
}

// net/http's own resend of a request on a reused connection that died is
// still counted as an attempt under the hook's otelhttp wrapper: the
// Transport reads its Base's type, not what the hooks wrap it in.
func TestHiddenResendsStayCounted(t *testing.T) {
	srv := rt.Start(t, rt.Script{"/": {rt.Status(200), rt.Hangup(), rt.Status(503), rt.Status(200)}}, rt.Options{})
	tp := sdktrace.NewTracerProvider()
	var attempts []int
	tr := &retryhttp.Transport{Base: srv.Transport(), Policy: retryhttp.Policy{MaxAttempts: 2, BaseDelay: time.Millisecond},
		Hooks: []retryhttp.Hook{retryhttp.HookFunc(func(_ context.Context, e retryhttp.Event) {
			if e.Kind == retryhttp.EventRetry || e.Kind == retryhttp.EventGiveUp {
				attempts = append(attempts, e.Attempt)
			}
		})}}
	defer tr.CloseIdleConnections()
	if _, err := retryhttpotel.Instrument(tr, retryhttpotel.WithTracerProvider(tp)); err != nil {
		t.Fatal(err)
	}
	c := &http.Client{Transport: tr}
	for range 2 {
		resp, err := c.Get(srv.URL + "/")
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	if len(srv.Requests()) != 3 || len(attempts) != 1 || attempts[0] != 2 {
		t.Fatalf("server saw %d requests, give-up after attempts %v; want 3 and [2]: the resend is attempt 2", len(srv.Requests()), attempts)
	}
}

// A hedge is an attempt of its own: two client spans under the request's,
// the straggler's ended when it is cancelled.
func TestHedgeSpans(t *testing.T) {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) == 1 {
			select {
			case <-r.Context().Done():
			case <-time.After(time.Second):
			}
			return
		}
		io.WriteString(w, "ok")
	}))
	defer srv.Close()
	sr := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr))
	base := srv.Client().Transport.(*http.Transport).Clone()
	defer base.CloseIdleConnections()
	tr := &retryhttp.Transport{Base: base, Hedge: &retryhttp.Hedging{Delay: 20 * time.Millisecond}}
	rtp, err := retryhttpotel.Instrument(tr, retryhttpotel.WithTracerProvider(tp))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := (&http.Client{Transport: rtp}).Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	deadline := time.Now().Add(2 * time.Second)
	for {
		var parents, attempts int
		for _, s := range sr.Ended() {
			switch s.SpanKind() {
			case trace.SpanKindInternal:
				parents++
			case trace.SpanKindClient:
				attempts++
			}
		}
		if parents == 1 && attempts == 2 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d request spans and %d attempt spans, want 1 and 2 (the first copy and the hedge)", parents, attempts)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

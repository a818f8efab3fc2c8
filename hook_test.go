package retryhttp

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// recordingHook logs what it wraps and sees into a shared list.
type recordingHook struct {
	name string
	log  *[]string
}

func (h *recordingHook) WrapRoundTrip(next http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(r *http.Request) (*http.Response, error) {
		*h.log = append(*h.log, h.name+" request")
		return next.RoundTrip(r)
	})
}

func (h *recordingHook) WrapAttempt(next http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(r *http.Request) (*http.Response, error) {
		*h.log = append(*h.log, h.name+" attempt")
		return next.RoundTrip(r)
	})
}

func (h *recordingHook) OnEvent(_ context.Context, e Event) {
	*h.log = append(*h.log, h.name+" "+e.Kind.String())
}

// Hooks compose in order, the Hooks field's first and then those added,
// the first outermost; each sees the request once, every attempt, and
// every decision.
func TestHooksComposeInOrder(t *testing.T) {
	var log []string
	a, b := &recordingHook{"a", &log}, &recordingHook{"b", &log}
	tr := &Transport{Base: script(status(503), status(200)), Policy: noWait, Budget: NoBudget,
		Hooks: []Hook{retryHook(func(_ Event) { log = append(log, "field") })}}
	tr.AddHook(a)
	tr.AddHook(b)
	tr.AddHook(a) // already there
	resp, err := tr.RoundTrip(newReq(t, "GET", "", nil))
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, []string{
		"a request", "b request",
		"a attempt", "b attempt",
		"field", "a retry", "b retry",
		"a attempt", "b attempt",
		"a done", "b done",
	}, log)
	assert.Len(t, tr.hooks.Load().list, 3, "the field's hook, a and b")
	assert.Len(t, tr.Hooks, 1, "AddHook leaves the field as it was")
}

// A give-up and a stacked retry reach the hooks too.
func TestHooksSeeGiveUpsAndStacking(t *testing.T) {
	var log []string
	h := &recordingHook{"h", &log}
	inner := &Transport{Base: script(status(503)), Policy: noWait, Budget: NoBudget}
	outer := &Transport{Base: inner, Policy: noWait, Budget: NoBudget}
	inner.AddHook(h)
	outer.AddHook(HookFunc(func(context.Context, Event) {})) // a hook that wraps nothing composes
	resp, err := outer.RoundTrip(newReq(t, "GET", "", nil))
	require.NoError(t, err)
	resp.Body.Close()
	assert.Contains(t, log, "h give_up")

	var events []Event
	outer.AddHook(eventsHook(func(e Event) { events = append(events, e) }))
	outer.AddHook(eventsHook(func(Event) {})) // two func hooks: added, not compared
	resp, err = outer.RoundTrip(newReq(t, "GET", "", nil))
	require.NoError(t, err)
	resp.Body.Close()
	require.Len(t, events, 2)
	assert.Equal(t, EventStacked, events[0].Kind)
	assert.Equal(t, "retryhttp", events[0].Signal)
	assert.Equal(t, EventDone, events[1].Kind)
	assert.Equal(t, ReasonNotRetryable, events[1].GiveUp)
	assert.Equal(t, "status", events[1].Outcome, "the 503 the inner Transport gave up on, not retried here")
}

// The Hooks field and AddHook report alike, and the Logger field logs
// what a LogHook logs.
func TestBuiltInObserversAreHooks(t *testing.T) {
	run := func(tr *Transport) {
		t.Helper()
		resp, err := tr.RoundTrip(newReq(t, "GET", "", nil))
		require.NoError(t, err)
		resp.Body.Close()
	}
	fieldReg, hookReg := prometheus.NewRegistry(), prometheus.NewRegistry()
	fieldM, err := NewMetrics(fieldReg, MetricsOptions{})
	require.NoError(t, err)
	hookM, err := NewMetrics(hookReg, MetricsOptions{})
	require.NoError(t, err)
	var fieldLogs, hookLogs bytes.Buffer
	var fieldEvents, hookEvents []Event

	byFields := &Transport{Base: script(status(503), status(503), status(200)), Policy: noWait, Budget: NoBudget,
		Logger: slog.New(slog.NewTextHandler(&fieldLogs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Hooks:  []Hook{fieldM, retryHook(func(e Event) { fieldEvents = append(fieldEvents, e) })}}
	byHooks := &Transport{Base: script(status(503), status(503), status(200)), Policy: noWait, Budget: NoBudget,
		Logger: slog.New(slog.DiscardHandler)}
	byHooks.AddHook(hookM)
	byHooks.AddHook(&LogHook{Logger: slog.New(slog.NewTextHandler(&hookLogs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	byHooks.AddHook(retryHook(func(e Event) { hookEvents = append(hookEvents, e) }))
	run(byFields)
	run(byHooks)

	created := regexp.MustCompile(`created_timestamp:\{[^}]*\}`)
	gather := func(reg *prometheus.Registry) map[string]string {
		mfs, err := reg.Gather()
		require.NoError(t, err)
		out := map[string]string{}
		for _, mf := range mfs {
			out[mf.GetName()] = created.ReplaceAllString(mf.String(), "")
		}
		return out
	}
	f, h := gather(fieldReg), gather(hookReg)
	assert.Equal(t, f, h)
	assert.Contains(t, f["retryhttp_retries_total"], "value:2")
	assert.Equal(t, 2, strings.Count(fieldLogs.String(), "retryhttp: retrying"))
	assert.Equal(t, strings.Count(fieldLogs.String(), "\n"), strings.Count(hookLogs.String(), "\n"))
	require.Len(t, hookEvents, 2)
	assert.Len(t, fieldEvents, 2)

	var zero LogHook // nil Logger: slog.Default()
	zero.OnEvent(context.Background(), Event{Kind: EventDone})
}

// eventsHook is a Hook that calls f with each event.
func eventsHook(f func(Event)) Hook { return HookFunc(func(_ context.Context, e Event) { f(e) }) }

// attemptsOnly is a Hook that wraps attempts and nothing else.
type attemptsOnly struct{ log *[]string }

func (h attemptsOnly) WrapAttempt(next http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(r *http.Request) (*http.Response, error) {
		*h.log = append(*h.log, "attempt")
		return next.RoundTrip(r)
	})
}

func (h attemptsOnly) OnEvent(_ context.Context, e Event) { *h.log = append(*h.log, e.Kind.String()) }

// A Hook's wrappers are optional: one that has only WrapAttempt wraps each
// attempt, and is not asked to wrap the request.
func TestHookWrappersAreOptional(t *testing.T) {
	var log []string
	tr := &Transport{Base: script(status(503), status(200)), Policy: noWait, Budget: NoBudget}
	tr.AddHook(attemptsOnly{&log})
	resp, err := tr.RoundTrip(newReq(t, "GET", "", nil))
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, []string{"attempt", "retry", "attempt", "done"}, log)
}

// A response the server's idempotency layer replayed is counted and
// logged at Debug, with its key.
func TestReplayedResponsesCounted(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg, MetricsOptions{})
	require.NoError(t, err)
	var logs bytes.Buffer
	replay := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: 201, Header: http.Header{"Idempotent-Replayed": {"true"}}, Body: http.NoBody, Request: r}, nil
	})
	tr := &Transport{Base: replay, Hooks: []Hook{m}, Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	for range 2 {
		resp, err := tr.RoundTrip(newReq(t, "POST", "{}", http.Header{"Idempotency-Key": {"order-1"}}))
		require.NoError(t, err)
		resp.Body.Close()
	}
	fresh := &Transport{Base: script(status(201)), Hooks: []Hook{m}}
	resp, err := fresh.RoundTrip(newReq(t, "POST", "{}", nil))
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, 2.0, testutil.ToFloat64(m.replayed))
	assert.Equal(t, 2, strings.Count(logs.String(), "replayed its stored response"))
	assert.Contains(t, logs.String(), "idempotency_key=order-1")
}

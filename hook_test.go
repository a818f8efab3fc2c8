package retryhttp

import (
	"context"
	"net/http"
	"testing"

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

// Hooks compose in the order they were added, the first outermost; each
// sees the request once, every attempt, and every decision after the
// built-in observers.
func TestHooksComposeInOrder(t *testing.T) {
	var log []string
	a, b := &recordingHook{"a", &log}, &recordingHook{"b", &log}
	tr := &Transport{Base: script(status(503), status(200)), Policy: noWait, Budget: NoBudget,
		OnRetry: func(RetryEvent) { log = append(log, "OnRetry") }}
	tr.AddHook(a)
	tr.AddHook(b)
	tr.AddHook(a) // already there
	resp, err := tr.RoundTrip(newReq(t, "GET", "", nil))
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, []string{
		"a request", "b request",
		"a attempt", "b attempt",
		"OnRetry", "a retry", "b retry",
		"a attempt", "b attempt",
	}, log)
	assert.Equal(t, []Hook{a, b}, tr.Hooks())
}

// A give-up and a stacked retry reach the hooks too.
func TestHooksSeeGiveUpsAndStacking(t *testing.T) {
	var log []string
	h := &recordingHook{"h", &log}
	inner := &Transport{Base: script(status(503)), Policy: noWait, Budget: NoBudget}
	outer := &Transport{Base: inner, Policy: noWait, Budget: NoBudget}
	inner.AddHook(h)
	outer.AddHook(&struct{ NoHook }{}) // a hook that does nothing composes
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
	require.NotEmpty(t, events)
	assert.Equal(t, EventStacked, events[len(events)-1].Kind)
	assert.Equal(t, "retryhttp", events[len(events)-1].Signal)
}

type eventsHook func(Event)

func (f eventsHook) WrapRoundTrip(next http.RoundTripper) http.RoundTripper { return next }
func (f eventsHook) WrapAttempt(next http.RoundTripper) http.RoundTripper   { return next }
func (f eventsHook) OnEvent(_ context.Context, e Event)                     { f(e) }

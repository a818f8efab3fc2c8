package retryhttp

import (
	"context"
	"net/http"
	"time"
)

// RetryEvent describes one retry decision: an attempt ended in a retryable
// failure, and the Transport either retries after Wait or gives up for
// GiveUp. A breaker's refusal is a give-up too, with Attempt the number of
// attempts sent before it (0 when it refused the first) and Err the
// ErrCircuitOpen error. It is what Transport.OnRetry receives and what the
// logs say.
type RetryEvent struct {
	// Request is the attempt's request, injected Idempotency-Key included.
	Request *http.Request
	// Attempt is the number of the attempt that failed, 1 for the first.
	Attempt int
	// Response or Err is the attempt's outcome; exactly one is set. Do not
	// read the response body: it is returned to the caller or drained.
	Response *http.Response
	Err      error
	// Trigger is what made the outcome worth retrying: the status code
	// ("503"), TriggerNetwork or TriggerTimeout; empty for a breaker's
	// refusal.
	Trigger Trigger
	// Wait is the wait before the next attempt, when one follows.
	Wait time.Duration
	// GiveUp is ReasonNone when a retry follows; otherwise why none does.
	GiveUp Reason
}

// event reports a retry decision (EventRetry or EventGiveUp) to the
// built-in observers and the hooks.
func (t *Transport) event(ctx context.Context, e RetryEvent) {
	kind := EventRetry
	if e.GiveUp != ReasonNone {
		kind = EventGiveUp
	}
	t.tell(ctx, &Event{Kind: kind, RetryEvent: e})
}

// tell reports e to the built-in observers (the Metrics, Logger and
// OnRetry fields, in that order), then to the hooks.
func (t *Transport) tell(ctx context.Context, e *Event) {
	t.Metrics.observe(e)
	if e.Kind != EventDone || replayed(e.Response) { // of a RoundTrip's end, the logs tell only a replay
		logEvent(ctx, orDefault(t.Logger), &t.stackWarned, *e)
	}
	if e.Kind != EventDone {
		OnRetryHook(t.OnRetry).OnEvent(ctx, *e)
	}
	if hs := t.hooks.Load(); hs != nil {
		hs.emit(ctx, *e)
	}
}

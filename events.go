package retryhttp

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/retryhttp/retryhttp/internal/wire"
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

// event reports a retry decision to the hook, the logger and the metrics.
func (t *Transport) event(ctx context.Context, e RetryEvent) {
	if e.GiveUp == ReasonNone {
		t.Metrics.retry(e.Request.URL, e.Trigger, e.Wait)
	}
	if t.OnRetry != nil {
		t.OnRetry(e)
	}
	if hs := t.hooks.Load(); hs != nil {
		kind := EventRetry
		if e.GiveUp != ReasonNone {
			kind = EventGiveUp
		}
		hs.emit(ctx, Event{Kind: kind, RetryEvent: e})
	}
	logger := t.logger()
	level, msg := slog.LevelDebug, "retryhttp: retrying"
	if e.GiveUp != ReasonNone {
		level, msg = slog.LevelWarn, "retryhttp: giving up"
	}
	if !logger.Enabled(ctx, level) {
		return
	}
	// Never the body, the query string or credentials: method, host and
	// path identify the call. Durations are written as people read them
	// ("1.5s"), in every handler.
	attrs := []slog.Attr{
		slog.String("method", valueOrGET(e.Request.Method)),
		slog.String("host", e.Request.URL.Host),
		slog.String("path", e.Request.URL.Path),
		slog.Int("attempt", e.Attempt),
	}
	if e.Trigger != "" {
		attrs = append(attrs, slog.String("trigger", string(e.Trigger)))
	}
	if e.Response != nil {
		attrs = append(attrs, slog.Int("status", e.Response.StatusCode))
	}
	if e.GiveUp == ReasonNone {
		attrs = append(attrs, slog.String("wait", e.Wait.String()))
	} else {
		attrs = append(attrs, slog.String("give_up", e.GiveUp.String()))
	}
	if k, _ := wire.Key(e.Request.Header); k != "" {
		attrs = append(attrs, slog.String("idempotency_key", k))
	}
	if e.Err != nil {
		attrs = append(attrs, slog.String("error", e.Err.Error()))
	}
	logger.LogAttrs(ctx, level, msg, attrs...)
}

func valueOrGET(m string) string {
	if m == "" {
		return http.MethodGet
	}
	return m
}

package retryhttp

import (
	"context"
	"log/slog"
	"net/http"
	"time"
)

// RetryEvent describes one retry decision: an attempt ended in a retryable
// failure, and the Transport either retries after Wait or gives up for
// GiveUp. It is what Transport.OnRetry receives and what the logs say.
type RetryEvent struct {
	// Request is the attempt's request, injected Idempotency-Key included.
	Request *http.Request
	// Attempt is the number of the attempt that failed, 1 for the first.
	Attempt int
	// Response or Err is the attempt's outcome; exactly one is set. Do not
	// read the response body: it is returned to the caller or drained.
	Response *http.Response
	Err      error
	// Reason is what triggered the retry: the status code ("503"),
	// "network" or "timeout".
	Reason string
	// Wait is the wait before the next attempt, when one follows.
	Wait time.Duration
	// GiveUp is empty when a retry follows; otherwise why none does (one of
	// the Reason* constants).
	GiveUp string
}

// event reports a retry decision to the hook, the logger and the metrics.
func (t *Transport) event(ctx context.Context, e RetryEvent) {
	if e.GiveUp == "" {
		t.Metrics.retry(e.Request.URL, e.Reason, e.Wait.Seconds())
	}
	if t.OnRetry != nil {
		t.OnRetry(e)
	}
	if t.Logger == nil {
		return
	}
	level, msg := slog.LevelInfo, "retryhttp: retrying"
	if e.GiveUp != "" {
		level, msg = slog.LevelWarn, "retryhttp: giving up"
	}
	if !t.Logger.Enabled(ctx, level) {
		return
	}
	// Never the body, the query string or credentials: method, host and
	// path identify the call.
	attrs := []slog.Attr{
		slog.String("method", valueOrGET(e.Request.Method)),
		slog.String("host", e.Request.URL.Host),
		slog.String("path", e.Request.URL.Path),
		slog.Int("attempt", e.Attempt),
		slog.String("reason", e.Reason),
	}
	if e.GiveUp == "" {
		attrs = append(attrs, slog.Duration("wait", e.Wait))
	} else {
		attrs = append(attrs, slog.String("give_up", e.GiveUp))
	}
	if k := e.Request.Header.Get(HeaderIdempotencyKey); k != "" {
		attrs = append(attrs, slog.String("idempotency_key", k))
	}
	if e.Err != nil {
		attrs = append(attrs, slog.String("error", e.Err.Error()))
	}
	t.Logger.LogAttrs(ctx, level, msg, attrs...)
}

func valueOrGET(m string) string {
	if m == "" {
		return http.MethodGet
	}
	return m
}

package retryhttp

import (
	"context"
	"log/slog"
	"net/http"
	"sync/atomic"

	"github.com/retryhttp/retryhttp/internal/wire"
)

// This file holds the built-in observers, each a [Hook]: *[Metrics] and
// [LogHook]. A Transport's Logger field logs what a LogHook would, before
// the hooks are told.

// OnEvent counts e: retries and their waits, requests with their outcome
// and attempts, give-ups, stacked retries. A nil *Metrics counts nothing.
func (m *Metrics) OnEvent(_ context.Context, e Event) {
	if m == nil {
		return
	}
	switch e.Kind {
	case EventRetry:
		m.retry(e.Request.URL, e.Trigger, e.Wait)
	case EventDone:
		m.countDone(e.Request, ending{e.Response, e.Err, e.Attempt, e.GiveUp}, e.isReplay())
	case EventStacked:
		m.stackedRetry(e.Signal)
	case EventHedge:
		m.hedges.Inc()
	case EventHedgeWon:
		m.won.Inc()
	}
}

// breakerWatcher is the optional method of a Hook that reports a
// Breaker's circuits: the Transport gives it its Breaker, once, so that
// the Transport knows no concrete observer type.
type breakerWatcher interface{ watchBreaker(*Breaker) }

// watchBreaker adds b's circuits to the circuit_state gauge, read when the
// registry is scraped.
func (m *Metrics) watchBreaker(b *Breaker) {
	if m != nil {
		m.shared.track(b)
	}
}

// LogHook logs retry decisions to Logger (slog.Default() when nil): one
// Debug record per retry, one per response the server replayed
// (Idempotent-Replayed: true), and one Warn record per give-up (see
// [Reason.GaveUp]), with method, host, path, attempt, trigger, status,
// wait or give_up, error, and any Idempotency-Key; never bodies, query
// strings or credentials; and one Warn record per kind of stacked retry
// it meets (see docs/exactly-once.md, "One retry layer"). Use it as a
// pointer: it remembers which warnings it gave.
type LogHook struct {
	Logger *slog.Logger

	warned atomic.Uint32 // a bit per stackedSignal warned about
}

// OnEvent logs e.
func (h *LogHook) OnEvent(ctx context.Context, e Event) {
	logEvent(ctx, orDefault(h.Logger), &h.warned, e)
}

// orDefault is l, or slog.Default() when it is nil: the rule of every
// Logger in this module and its integrations.
func orDefault(l *slog.Logger) *slog.Logger {
	if l != nil {
		return l
	}
	return slog.Default()
}

// logEvent is LogHook's body, shared with the Transport's Logger field;
// warned holds a bit per stacked signal already warned about.
func logEvent(ctx context.Context, logger *slog.Logger, warned *atomic.Uint32, e Event) {
	switch e.Kind {
	case EventStacked:
		s, ok := stackedSignalNamed(e.Signal)
		if !ok || stackedSignals[s].warning == "" {
			// A retried operation is the design working (its call is sent
			// once), not a setting to fix: counted, not warned about.
			return
		}
		bit := uint32(1) << s
		if warned.Load()&bit != 0 || warned.Or(bit)&bit != 0 {
			return
		}
		logger.LogAttrs(ctx, slog.LevelWarn, stackedSignals[s].warning, slog.String("signal", e.Signal))
		return
	case EventDone:
		if e.isReplay() && logger.Enabled(ctx, slog.LevelDebug) {
			attrs := []slog.Attr{slog.String("method", valueOrGET(e.Request.Method)), slog.String("host", e.Request.URL.Host),
				slog.String("path", e.Request.URL.Path), slog.Int("status", e.Response.StatusCode)}
			if k, _ := wire.Key(e.Request.Header); k != "" {
				attrs = append(attrs, slog.String("idempotency_key", k))
			}
			logger.LogAttrs(ctx, slog.LevelDebug, "retryhttp: the server replayed its stored response", attrs...)
		}
		return
	case EventRetry, EventGiveUp:
	default:
		return
	}
	level, msg := slog.LevelDebug, "retryhttp: retrying"
	if e.Kind == EventGiveUp {
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
	if e.Kind == EventRetry {
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

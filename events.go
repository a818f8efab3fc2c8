package retryhttp

import (
	"net/http"
	"strconv"
	"time"

	"github.com/retryhttp/retryhttp/internal/wire"
)

// EventKind says what an Event reports.
type EventKind uint8

func (k EventKind) String() string {
	switch k {
	case EventRetry:
		return "retry"
	case EventGiveUp:
		return "give_up"
	case EventStacked:
		return "stacked"
	case EventDone:
		return "done"
	case EventHedge:
		return "hedge"
	case EventHedgeWon:
		return "hedge_won"
	}
	return "EventKind(" + strconv.Itoa(int(k)) + ")"
}

// Event is what a Hook is told: one retry decision (EventRetry,
// EventGiveUp), a retry stacked on another layer's (EventStacked), a hedge
// (EventHedge, EventHedgeWon) or a RoundTrip's end (EventDone). Each kind
// says which fields it sets. A retry decision means an attempt ended in a
// retryable failure, and the Transport either retries after Wait or gives
// up for GiveUp; a breaker's or throttle's refusal is a give-up too, with
// Attempt the number of attempts sent before it (0 when it refused the
// first) and Err its error.
type Event struct {
	Kind EventKind

	// Request is the attempt's request, injected Idempotency-Key included
	// (the caller's request, for EventDone).
	Request *http.Request
	// Attempt is the number of the attempt that failed, 1 for the first
	// (the attempts sent, for EventDone).
	Attempt int
	// Response or Err is the attempt's outcome; exactly one is set. Do not
	// read the response body: it is returned to the caller or drained.
	Response *http.Response
	Err      error
	// Trigger is what made the outcome worth retrying: the status code
	// ("503"), TriggerNetwork or TriggerTimeout; empty for a refusal.
	Trigger Trigger
	// Wait is the wait before the next attempt, when one follows.
	Wait time.Duration
	// GiveUp is ReasonNone when a retry follows; otherwise why none does.
	GiveUp Reason
	// replay is whether Response is a replay (Idempotent-Replayed), as the
	// Transport read it once for an EventDone: replayUnknown in an Event
	// built elsewhere, which the observers read from Response.
	replay replayState

	// Signal is the signal label of retryhttp_stacked_retries_total, for
	// EventStacked: "retryhttp", "idempotency_key", "operation",
	// "amz_sdk_request", "stainless", "google".
	Signal string
	// Outcome names how the RoundTrip ended, for EventDone, as the outcome
	// label of retryhttp_requests_total does, so that every telemetry names
	// outcomes alike: the label of the Reason the Transport stopped for (a
	// give-up such as "attempts", or "canceled"), and otherwise "success"
	// (a final status below 400), "status" (a final status of 400 or more)
	// or "error".
	Outcome string
}

const (
	// EventRetry: an attempt failed retryably and a retry follows after
	// Wait.
	EventRetry EventKind = iota + 1
	// EventGiveUp: an attempt failed retryably and no retry follows, for
	// GiveUp; or a brake refused an attempt, before it was sent: the
	// Pacer, the Limit, the Throttle, the Breaker or the Budget (see
	// Reason.GaveUp).
	EventGiveUp
	// EventStacked: a layer above (or a Transport below) retries this
	// request too; Signal names how the Transport knew.
	EventStacked
	// EventDone: the RoundTrip ended, with what its caller gets. Request
	// is the caller's, Attempt the attempts sent, Response or Err the
	// outcome (do not read the body) and GiveUp the reason no further
	// attempt followed: ReasonNotRetryable for a success or a status not
	// retried; Outcome names the end.
	EventDone
	// EventHedge: a hedge was sent (see Hedging): Request is its copy and
	// Attempt its attempt number.
	EventHedge
	// EventHedgeWon: a hedge's response was the usable one, and the
	// other copies were cancelled.
	EventHedgeWon
)

// replayState is Event.replay.
type replayState uint8

const (
	replayUnknown replayState = iota
	replayNo
	replayYes
)

// isReplay reports whether e's response is a replay, read once by the
// Transport or, in an Event built elsewhere, from the response.
func (e *Event) isReplay() bool {
	if e.replay == replayUnknown {
		return replayed(e.Response)
	}
	return e.replay == replayYes
}

// replayed reports whether resp is a stored answer the server's
// idempotency layer replayed.
func replayed(resp *http.Response) bool {
	if resp == nil {
		return false
	}
	v := resp.Header[wire.Replayed] // the name is canonical: a map read, no Get's canonicalisation
	return len(v) > 0 && v[0] == "true"
}

// ending is how a RoundTrip ends: the outcome its caller gets, after how
// many attempts, and the reason no other followed.
type ending struct {
	resp     *http.Response
	err      error
	attempts int
	reason   Reason
}

// over reports whether the RoundTrip ends here: every ending has a reason,
// and the zero ending is "go on".
func (o *ending) over() bool { return o.reason != ReasonNone }

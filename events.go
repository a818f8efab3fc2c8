package retryhttp

import (
	"net/http"
	"strconv"
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

// Event is what a Hook is told. For EventRetry and EventGiveUp, its
// RetryEvent is the one OnRetry receives; for EventStacked only Request
// and Signal are set.
type Event struct {
	Kind EventKind
	RetryEvent
	// Signal is the signal label of retryhttp_stacked_retries_total, for
	// EventStacked: "retryhttp", "idempotency_key", "operation",
	// "amz_sdk_request", "stainless", "google".
	Signal string
}

const (
	// EventRetry: an attempt failed retryably and a retry follows after
	// Wait.
	EventRetry EventKind = iota + 1
	// EventGiveUp: an attempt failed retryably and no retry follows, for
	// GiveUp; or the breaker refused an attempt.
	EventGiveUp
	// EventStacked: a layer above (or a Transport below) retries this
	// request too; Signal names how the Transport knew.
	EventStacked
	// EventDone: the RoundTrip ended, with what its caller gets. Request
	// is the caller's, Attempt the attempts sent, Response or Err the
	// outcome (do not read the body) and GiveUp the reason no further
	// attempt followed: ReasonNotRetryable for a success or a status not
	// retried (see Outcome).
	EventDone
	// EventHedge: a hedge was sent (see Hedging): Request is its copy and
	// Attempt its attempt number.
	EventHedge
	// EventHedgeWon: a hedge's response was the usable one, and the
	// other copies were cancelled.
	EventHedgeWon
)

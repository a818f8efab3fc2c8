package retryhttp

import "strconv"

// Reason says why a RoundTrip stopped. It is RetryError.Reason, the
// give_up field of logs, the reason label of retryhttp_give_ups_total and,
// for a give-up, the outcome label of retryhttp_requests_total.
//
// A give-up (Reason.GaveUp) is a retryable failure that was not retried:
// attempts, elapsed, deadline, retry_after_too_long, budget, circuit_open,
// body, throttled, limited, paced. not_retryable, canceled and before_attempt are not give-ups.
type Reason uint8

const (
	// ReasonNone: no stop; a retry follows. Only Event.GiveUp holds it.
	ReasonNone Reason = iota
	// ReasonNotRetryable: the outcome or the request is not safe or not
	// useful to retry (a success, a 4xx, a TLS error, a POST without a key
	// that may have reached the server).
	ReasonNotRetryable
	// ReasonCanceled: the caller's context was cancelled or expired.
	ReasonCanceled
	// ReasonBeforeAttempt: Transport.BeforeAttempt stopped the call.
	ReasonBeforeAttempt
	// ReasonAttempts: Policy.MaxAttempts were sent.
	ReasonAttempts
	// ReasonElapsed: the next wait would end past Policy.MaxElapsed.
	ReasonElapsed
	// ReasonDeadline: the next wait would end past the context's deadline.
	ReasonDeadline
	// ReasonRetryAfterTooLong: the server asked for a longer wait than
	// Policy.MaxRetryAfter.
	ReasonRetryAfterTooLong
	// ReasonBudget: the retry budget was empty.
	ReasonBudget
	// ReasonCircuitOpen: the host's circuit was open.
	ReasonCircuitOpen
	// ReasonBody: the request body could not be sent again.
	ReasonBody
	// ReasonThrottled: the Throttle rejected the attempt locally.
	ReasonThrottled
	// ReasonLimited: the host's concurrency limit (Transport.Limit) had
	// no room and its queue none either, or the wait in it passed its
	// MaxWait.
	ReasonLimited
	// ReasonPaced: the host's rate-limit quota (Transport.Pacer) was
	// spent, and came back only after the Pacer's MaxWait or the
	// context's deadline.
	ReasonPaced

	numReasons // the count of reasons above; TestReasonsTable checks each has its entry
)

// reasons is the one list of reasons: the label each has in metrics and
// logs, and the words the error text uses. Its length is numReasons, so a
// new constant without an entry fails to compile; TestReasonsTable checks
// that no entry is empty.
var reasons = [numReasons]struct{ label, text string }{
	ReasonNone:              {"none", "retrying"},
	ReasonNotRetryable:      {"not_retryable", "not retried"},
	ReasonCanceled:          {"canceled", "canceled"},
	ReasonBeforeAttempt:     {"before_attempt", "stopped by BeforeAttempt"},
	ReasonAttempts:          {"attempts", "gave up: attempt limit reached"},
	ReasonElapsed:           {"elapsed", "gave up: the next wait would pass MaxElapsed"},
	ReasonDeadline:          {"deadline", "gave up: the next wait would pass the deadline"},
	ReasonRetryAfterTooLong: {"retry_after_too_long", "gave up: the server asked for a wait longer than MaxRetryAfter"},
	ReasonBudget:            {"budget", "gave up: retry budget exhausted"},
	ReasonCircuitOpen:       {"circuit_open", "gave up: circuit open"},
	ReasonBody:              {"body", "gave up: the request body cannot be sent again"},
	ReasonThrottled:         {"throttled", "gave up: throttled by the client"},
	ReasonLimited:           {"limited", "gave up: over the host's concurrency limit"},
	ReasonPaced:             {"paced", "gave up: the host's rate-limit quota is spent until after the wait allowed"},
}

// String returns the reason's label: "attempts", "circuit_open", ...
func (r Reason) String() string {
	if int(r) < len(reasons) {
		return reasons[r].label
	}
	return "Reason(" + strconv.Itoa(int(r)) + ")"
}

// MarshalText makes a Reason read as its label in JSON and logs.
func (r Reason) MarshalText() ([]byte, error) { return []byte(r.String()), nil }

// GaveUp reports whether r is a give-up: a retryable failure that was not
// retried.
func (r Reason) GaveUp() bool { return r >= ReasonAttempts && int(r) < len(reasons) }

func (r Reason) text() string {
	if int(r) < len(reasons) {
		return reasons[r].text
	}
	return r.String()
}

// Trigger names what made an attempt's outcome worth retrying: a response
// status ("503"), TriggerNetwork or TriggerTimeout. It is Event.Trigger,
// the trigger field of logs and the trigger label of
// retryhttp_retries_total. A trigger is why a retry was wanted; a Reason is
// why none followed.
type Trigger string

// Triggers that are not a status code.
const (
	// TriggerNetwork: a transient network error (reset, refused, EOF,
	// an HTTP/2 stream reset).
	TriggerNetwork Trigger = "network"
	// TriggerTimeout: a network timeout or Policy.AttemptTimeout.
	TriggerTimeout Trigger = "timeout"
)

// statusTrigger names a status as a trigger without allocating for the
// common ones.
func statusTrigger(status int) Trigger {
	switch status {
	case 408:
		return "408"
	case 409:
		return "409"
	case 425:
		return "425"
	case 429:
		return "429"
	case 500:
		return "500"
	case 502:
		return "502"
	case 503:
		return "503"
	case 504:
		return "504"
	}
	return Trigger(strconv.Itoa(status))
}

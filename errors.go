package retryhttp

import (
	"errors"
	"fmt"
)

// Sentinel errors, matched with errors.Is.
var (
	// ErrInvalidPolicy reports a Policy field out of range; nothing was sent.
	ErrInvalidPolicy = errors.New("retryhttp: invalid policy")
	// ErrAttemptTimeout is the error of an attempt that did not receive
	// response headers within Policy.AttemptTimeout. It is retried like a
	// network timeout.
	ErrAttemptTimeout = errors.New("retryhttp: attempt timed out waiting for response headers")
)

// RetryError is returned when the last attempt of a RoundTrip ended in an
// error (a network error, a timeout, a cancelled context) rather than a
// response. It says how many attempts were sent and why the Transport
// stopped, and unwraps to the last attempt's error, so errors.Is(err,
// syscall.ECONNREFUSED) and errors.Is(err, context.Canceled) keep working.
type RetryError struct {
	// Attempts is the number of attempts sent, the first included.
	Attempts int
	// Reason says why no further attempt was made: one of the Reason*
	// constants.
	Reason string
	// Err is the last attempt's error.
	Err error
}

func (e *RetryError) Error() string {
	return fmt.Sprintf("retryhttp: %s after %d attempt(s): %v", e.Reason, e.Attempts, e.Err)
}

func (e *RetryError) Unwrap() error { return e.Err }

// Reasons a RoundTrip stops; they name the give_ups_total metric's labels,
// RetryError.Reason and the reason field of logs.
const (
	// ReasonNotRetryable: the outcome or the request is not safe or not
	// useful to retry (a 4xx, a TLS error, a POST without a key that may have
	// reached the server).
	ReasonNotRetryable = "not_retryable"
	// ReasonAttempts: Policy.MaxAttempts were sent.
	ReasonAttempts = "attempts"
	// ReasonElapsed: the next wait would end past Policy.MaxElapsed.
	ReasonElapsed = "elapsed"
	// ReasonDeadline: the next wait would end past the context's deadline.
	ReasonDeadline = "deadline"
	// ReasonCanceled: the caller's context was cancelled or expired.
	ReasonCanceled = "canceled"
	// ReasonRetryAfterTooLong: Retry-After asked for more than
	// Policy.MaxRetryAfter.
	ReasonRetryAfterTooLong = "retry_after_too_long"
	// ReasonBody: the request body could not be replayed or re-read.
	ReasonBody = "body"
)

// Reasons added by the budget and the breaker.
const (
	// ReasonBudget: the retry budget was empty.
	ReasonBudget = "budget"
	// ReasonCircuitOpen: the host's circuit was open.
	ReasonCircuitOpen = "circuit_open"
)

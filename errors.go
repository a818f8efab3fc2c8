package retryhttp

import (
	"errors"
	"strconv"
)

// Sentinel errors, matched with errors.Is.
var (
	// ErrInvalidPolicy reports a Policy field out of range; nothing was sent.
	ErrInvalidPolicy = errors.New("retryhttp: invalid policy")
	// ErrAttemptTimeout is the error of an attempt that did not receive
	// response headers within Policy.AttemptTimeout. It is retried like a
	// network timeout, and like one it reports Timeout() true, so
	// os.IsTimeout and url.Error.Timeout see it.
	ErrAttemptTimeout error = attemptTimeout{}
)

type attemptTimeout struct{}

func (attemptTimeout) Error() string {
	return "retryhttp: attempt timed out waiting for response headers"
}
func (attemptTimeout) Timeout() bool   { return true }
func (attemptTimeout) Temporary() bool { return true }

// RetryError is returned when the last attempt of a RoundTrip ended in an
// error (a network error, a timeout, a cancelled context, an open circuit)
// rather than a response. It says how many attempts were sent and why the
// Transport stopped, and unwraps to the last attempt's error, so
// errors.Is(err, syscall.ECONNREFUSED) and errors.Is(err,
// context.Canceled) keep working. Like net/url.Error it passes Timeout()
// and Temporary() through, so os.IsTimeout(err) and a net.Error's
// Timeout() answer as they would without the Transport.
type RetryError struct {
	// Attempts is the number of attempts sent, the first included; 0 when
	// the breaker refused the first one.
	Attempts int
	// Reason says why no further attempt was made.
	Reason Reason
	// Err is the last attempt's error.
	Err error

	retried bool // the Transport could retry (MaxAttempts > 1): a Transport above must not
}

// Error says how many attempts were sent and why the Transport stopped.
// A request sent once and not retried, because its error was not one to
// retry or its caller's context ended, reads as the error alone, as
// net/http would have returned it ("Get ...: EOF"): nothing of the
// Transport's happened to it. The detail is still there for errors.As.
func (e *RetryError) Error() string {
	if e.Attempts == 1 && (e.Reason == ReasonNotRetryable || e.Reason == ReasonCanceled) {
		return e.Err.Error()
	}
	s := "retryhttp: " + e.Reason.text() + " (" + strconv.Itoa(e.Attempts) + " attempt"
	if e.Attempts != 1 {
		s += "s"
	}
	return s + "): " + e.Err.Error()
}

func (e *RetryError) Unwrap() error { return e.Err }

// Timeout reports whether the last attempt's error was a timeout.
func (e *RetryError) Timeout() bool {
	var t interface{ Timeout() bool }
	return errors.As(e.Err, &t) && t.Timeout()
}

// Temporary reports whether the last attempt's error says it was
// temporary, as net/url.Error does.
func (e *RetryError) Temporary() bool {
	var t interface{ Temporary() bool }
	return errors.As(e.Err, &t) && t.Temporary()
}

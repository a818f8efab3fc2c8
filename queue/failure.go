package queue

import (
	"errors"
	"fmt"
	"runtime/debug"
)

// Permanent marks err as a failure that no redelivery can fix (a message
// that does not parse, an order that no longer exists): a consumer given
// it ends the message at once (EventDead) instead of running it again
// until its MaxAttempts. The key is released, as for any failure, so a
// corrected message under the same key runs. Permanent(nil) is nil.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &permanentError{err}
}

// IsPermanent reports whether err, or an error it wraps, was marked by
// Permanent.
func IsPermanent(err error) bool {
	var p *permanentError
	return errors.As(err, &p)
}

type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

// PanicError is the failure a consumer reports when its handler panicked:
// the handler's run counts as failed (the key released, the message run
// again after its backoff or ended at MaxAttempts), and the process goes
// on with the messages behind it.
type PanicError struct {
	Value any    // what the handler panicked with
	Stack []byte // the handler's goroutine stack at the panic
}

func (e *PanicError) Error() string { return fmt.Sprintf("queue: the handler panicked: %v", e.Value) }

// Unwrap returns the panic's value when it is an error.
func (e *PanicError) Unwrap() error {
	err, _ := e.Value.(error)
	return err
}

// run calls h and returns what it returns, or a *PanicError if it
// panicked. Process runs handlers through it, inside the
// idempotency.Runner, so that a panic releases the key like a returned
// error rather than crashing the consumer with the message unacknowledged,
// which brings it back without end.
func run(h func() ([]byte, error)) (out []byte, err error) {
	defer func() {
		if v := recover(); v != nil {
			out, err = nil, &PanicError{Value: v, Stack: debug.Stack()}
		}
	}()
	return h()
}

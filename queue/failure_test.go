package queue

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
)

func TestPermanent(t *testing.T) {
	if Permanent(nil) != nil {
		t.Error("Permanent(nil) is not nil")
	}
	gone := errors.New("the order no longer exists")
	err := fmt.Errorf("ship: %w", Permanent(gone))
	if !IsPermanent(err) || !errors.Is(err, gone) || err.Error() != "ship: the order no longer exists" {
		t.Errorf("%v: IsPermanent %v, Is %v", err, IsPermanent(err), errors.Is(err, gone))
	}
	if IsPermanent(gone) || IsPermanent(nil) {
		t.Error("an unmarked error is permanent")
	}
}

func TestRunRecoversAPanic(t *testing.T) {
	out, err := Run(func() ([]byte, error) { return []byte("shipped"), nil })
	if string(out) != "shipped" || err != nil {
		t.Errorf("Run of a handler that returns: %q, %v", out, err)
	}
	cause := errors.New("nil map")
	out, err = Run(func() ([]byte, error) { panic(cause) })
	var p *PanicError
	if out != nil || !errors.As(err, &p) || p.Value != cause || !errors.Is(err, cause) {
		t.Fatalf("Run of a handler that panics: %q, %v", out, err)
	}
	if !strings.Contains(string(p.Stack), "TestRunRecoversAPanic") {
		t.Errorf("the stack does not name the panicking handler's caller:\n%s", p.Stack)
	}
	if _, err := Run(func() ([]byte, error) { panic("text") }); err == nil || errors.Unwrap(err) != nil ||
		err.Error() != "queue: the handler panicked: text" {
		t.Errorf("a panic with a string: %v", err)
	}
}

// A failed delivery's log record names its key, its count and its error,
// and the stack only of a handler that panicked.
func TestFailureAttrs(t *testing.T) {
	names := func(attrs []slog.Attr) string {
		var b strings.Builder
		for _, a := range attrs {
			b.WriteString(a.Key + "=" + a.Value.String() + " ")
		}
		return b.String()
	}
	got := names(FailureAttrs("order-1", 3, errors.New("flicker")))
	if got != "key=order-1 deliveries=3 error=flicker " {
		t.Errorf("a plain failure: %q", got)
	}
	_, err := Run(func() ([]byte, error) { panic("boom") })
	if got := names(FailureAttrs("order-2", 1, err)); !strings.Contains(got, "stack=") || !strings.Contains(got, "error=queue: the handler panicked: boom") {
		t.Errorf("a panic: %q", got)
	}
}

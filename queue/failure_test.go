package queue

import (
	"errors"
	"fmt"
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
	out, err := run(func() ([]byte, error) { return []byte("shipped"), nil })
	if string(out) != "shipped" || err != nil {
		t.Errorf("run of a handler that returns: %q, %v", out, err)
	}
	cause := errors.New("nil map")
	out, err = run(func() ([]byte, error) { panic(cause) })
	var p *PanicError
	if out != nil || !errors.As(err, &p) || p.Value != cause || !errors.Is(err, cause) {
		t.Fatalf("run of a handler that panics: %q, %v", out, err)
	}
	if !strings.Contains(string(p.Stack), "TestRunRecoversAPanic") {
		t.Errorf("the stack does not name the panicking handler's caller:\n%s", p.Stack)
	}
	if _, err := run(func() ([]byte, error) { panic("text") }); err == nil || errors.Unwrap(err) != nil ||
		err.Error() != "queue: the handler panicked: text" {
		t.Errorf("a panic with a string: %v", err)
	}
}

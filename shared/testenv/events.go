package testenv

import (
	"context"
	"sync"
	"testing"
	"time"
)

// Recorder keeps the events a Hook is told, for the tests of any package
// whose Hook has the shape OnEvent(ctx, E). It is safe for concurrent use.
type Recorder[E any] struct {
	mu     sync.Mutex
	events []E
}

// OnEvent keeps e.
func (r *Recorder[E]) OnEvent(_ context.Context, e E) {
	r.mu.Lock()
	r.events = append(r.events, e)
	r.mu.Unlock()
}

// Events returns the events kept so far, in order.
func (r *Recorder[E]) Events() []E {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]E(nil), r.events...)
}

// Count is how many of the events kept so far match.
func (r *Recorder[E]) Count(match func(E) bool) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, e := range r.events {
		if match(e) {
			n++
		}
	}
	return n
}

// Eventually waits until cond holds, looking every 20 ms, and fails t if
// a minute passes first (a margin for a busy machine, not a timing).
func Eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("a minute passed without %s", what)
		}
	}
}

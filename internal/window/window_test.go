package window

import (
	"sync"
	"testing"
	"time"
)

// Concurrent events are all counted: the bucket's compare-and-swap loses
// none.
func TestConcurrentEventsAreCounted(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	w := New(time.Hour)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 1000 {
				w.Add(false, now)
			}
		})
	}
	wg.Wait()
	w.Add(true, now)
	if h, n := w.Sums(now); h != 1 || n != 8001 {
		t.Fatalf("window counts %d hits of %d events, want 1 of 8001", h, n)
	}
}

// Events leave the window after it has passed, bucket by bucket.
func TestEventsExpire(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	w := New(10 * time.Second)
	for i := range 10 {
		w.Add(i%2 == 0, start.Add(time.Duration(i)*time.Second))
	}
	if h, n := w.Sums(start.Add(9 * time.Second)); h != 5 || n != 10 {
		t.Fatalf("at 9 s: %d hits of %d, want 5 of 10", h, n)
	}
	if h, n := w.Sums(start.Add(12 * time.Second)); h != 3 || n != 7 {
		t.Fatalf("at 12 s: %d hits of %d, want 3 of 7 (the first three seconds expired)", h, n)
	}
	if _, n := w.Sums(start.Add(time.Minute)); n != 0 {
		t.Fatalf("a minute later: %d events, want none", n)
	}
	if !w.Hit() {
		t.Fatal("Hit: the buckets still hold hits")
	}
	w.Reset()
	if w.Hit() {
		t.Fatal("Hit after Reset")
	}
}

// An event counted late, a whole window after its time, is outside every
// count and leaves the later events in its bucket as they were.
func TestLateEventKeepsTheLaterBucket(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	w := New(10 * time.Second)
	later := start.Add(10 * time.Second) // the same bucket, one window on
	w.Add(true, later)
	w.Add(false, later)
	w.Add(false, start)
	if h, n := w.Sums(later); h != 1 || n != 2 {
		t.Fatalf("after a late event: %d hits of %d, want the later bucket's 1 of 2", h, n)
	}
	w.Add(true, start.Add(20*time.Second)) // a newer epoch still starts the bucket afresh
	if h, n := w.Sums(start.Add(20 * time.Second)); h != 1 || n != 1 {
		t.Fatalf("a window on: %d hits of %d, want 1 of 1", h, n)
	}
}

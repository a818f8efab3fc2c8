package budget

import (
	"sync"
	"testing"
	"time"
)

const t0 = time.Duration(1_000_000) * time.Second

func near(t *testing.T, got, want float64, what string) {
	t.Helper()
	if got < want-1e-9 || got > want+1e-9 {
		t.Errorf("%s: %v, want %v", what, got, want)
	}
}

func TestRatio(t *testing.T) {
	b := New(0.1, 0, 10*time.Second)
	for range 100 {
		b.Deposit(t0)
	}
	for i := range 10 {
		if !b.Withdraw(t0) {
			t.Fatalf("retry %d of 10 refused", i+1)
		}
	}
	if b.Withdraw(t0) {
		t.Fatal("the 11th retry exceeds 10% of 100 requests")
	}
	near(t, b.Available(t0), 0, "available")
}

func TestFloorAndExpiry(t *testing.T) {
	b := New(0, 2, 10*time.Second) // 2/s over 10s: a reserve of 20
	n := 0
	for b.Withdraw(t0) {
		n++
	}
	if n != 20 {
		t.Fatalf("%d retries from the floor, want 20", n)
	}
	if b.Withdraw(t0 + (9 * time.Second)) {
		t.Error("withdrawals stay inside the window")
	}
	if !b.Withdraw(t0 + (10 * time.Second)) {
		t.Error("withdrawals expire after the window")
	}

	c := New(0.5, 0, 10*time.Second)
	c.Deposit(t0)
	c.Deposit(t0)
	near(t, c.Available(t0+(9*time.Second)), 1, "inside the window")
	near(t, c.Available(t0+(10*time.Second)), 0, "deposits expire after the window")
	near(t, c.Available(t0+(-time.Hour)), 0, "time going backwards does not resurrect them")
}

func TestSlidesSlotBySlot(t *testing.T) {
	b := New(1, 0, 10*time.Second)
	for s := range 10 {
		b.Deposit(t0 + (time.Duration(s) * time.Second)) // one token per second
	}
	near(t, b.Available(t0+(9*time.Second)), 10, "at 9s")
	near(t, b.Available(t0+(12*time.Second)), 7, "at 12s")
	near(t, b.Available(t0+(18*time.Second)), 1, "at 18s")
}

func TestWindow(t *testing.T) {
	b := New(1, 0, time.Second) // slots of 100ms
	b.Deposit(t0)
	near(t, b.Available(t0+(900*time.Millisecond)), 1, "inside a 1s window")
	near(t, b.Available(t0+(time.Second)), 0, "expired after a 1s window")
}

func TestConcurrent(t *testing.T) {
	b := New(0.1, 0, 10*time.Second)
	var wg sync.WaitGroup
	var mu sync.Mutex
	granted := 0
	for range 8 {
		wg.Go(func() {
			for range 1000 {
				b.Deposit(t0)
			}
		})
	}
	wg.Wait()
	for range 8 {
		wg.Go(func() {
			for range 200 {
				if b.Withdraw(t0) {
					mu.Lock()
					granted++
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	if granted != 800 {
		t.Fatalf("%d retries granted, want 800 (10%% of 8,000)", granted)
	}
}

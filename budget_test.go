package retryhttp

import (
	"math"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestBudgetRatio(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	b := NewBudget(0.1, 0)
	for range 100 {
		b.Deposit(now)
	}
	for i := range 10 {
		require.True(t, b.Withdraw(now), "retry %d of 10", i+1)
	}
	assert.False(t, b.Withdraw(now), "the 11th retry exceeds 10% of 100 requests")
	assert.InDelta(t, 0, b.Available(now), 1e-9)
}

func TestBudgetFloorAndExpiry(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	b := NewBudget(0, 2) // 2/s over 10s: a reserve of 20
	n := 0
	for b.Withdraw(now) {
		n++
	}
	assert.Equal(t, 20, n)
	assert.False(t, b.Withdraw(now.Add(9*time.Second)), "withdrawals stay inside the window")
	assert.True(t, b.Withdraw(now.Add(10*time.Second)), "and expire after it")

	c := NewBudget(0.5, 0)
	c.Deposit(now)
	c.Deposit(now)
	assert.InDelta(t, 1, c.Available(now.Add(9*time.Second)), 1e-9)
	assert.InDelta(t, 0, c.Available(now.Add(10*time.Second)), 1e-9, "deposits expire after the window")
	assert.InDelta(t, 0, c.Available(now.Add(-time.Hour)), 1e-9, "time going backwards does not resurrect them")
}

func TestBudgetSlidesSlotBySlot(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	b := NewBudget(1, 0)
	for s := range 10 {
		b.Deposit(t0.Add(time.Duration(s) * time.Second)) // one token per second
	}
	assert.InDelta(t, 10, b.Available(t0.Add(9*time.Second)), 1e-9)
	assert.InDelta(t, 7, b.Available(t0.Add(12*time.Second)), 1e-9)
	assert.InDelta(t, 1, b.Available(t0.Add(18*time.Second)), 1e-9)
}

func TestBudgetZeroNoAndBad(t *testing.T) {
	now := time.Now()
	var zero Budget
	zero.Deposit(now)
	assert.False(t, zero.Withdraw(now), "the zero Budget allows no retries")
	for range 1000 {
		require.True(t, NoBudget.Withdraw(now))
	}
	assert.True(t, math.IsInf(NoBudget.Available(now), 1))
	for _, bad := range [][2]float64{{-0.1, 1}, {0.1, -1}, {math.NaN(), 1}, {0.1, math.Inf(1)}} {
		assert.Panics(t, func() { NewBudget(bad[0], bad[1]) }, "%v", bad)
	}
	assert.PanicsWithValue(t, "retryhttp: NewBudget: ratio -1 must be a finite number >= 0", func() { NewBudget(-1, 0) })
}

func TestBudgetConcurrent(t *testing.T) {
	b := NewBudget(0.1, 0)
	now := time.Now()
	var wg sync.WaitGroup
	var mu sync.Mutex
	granted := 0
	for range 8 {
		wg.Go(func() {
			for range 1000 {
				b.Deposit(now)
			}
		})
	}
	wg.Wait()
	for range 8 {
		wg.Go(func() {
			for range 200 {
				if b.Withdraw(now) {
					mu.Lock()
					granted++
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	assert.Equal(t, 800, granted)
}

// TestBudgetUnderFullOutage: 10,000 requests at 100/s against a base that
// always answers 503. Without a budget every request makes 4 attempts; with
// the default budget the total stays within 1.1 × requests + floor × time.
func TestBudgetUnderFullOutage(t *testing.T) {
	for _, tc := range []struct {
		name   string
		budget *Budget
	}{{"default budget", nil}, {"explicit 10%, 10/s", NewBudget(0.1, 10)}, {"no budget", NoBudget}} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				const requests = 10_000
				base := script(status(503))
				tr := &Transport{Base: base, Budget: tc.budget}
				start := time.Now()
				var wg sync.WaitGroup
				for range requests {
					wg.Go(func() {
						resp, err := tr.RoundTrip(newReq(t, "GET", "", nil))
						if err == nil {
							resp.Body.Close()
						}
					})
					time.Sleep(10 * time.Millisecond)
				}
				wg.Wait()
				elapsed := time.Since(start)
				attempts := base.attempts()
				amp := float64(attempts) / requests
				t.Logf("%s: %d attempts for %d requests in %v: amplification %.3f", tc.name, attempts, requests, elapsed, amp)
				if tc.budget == NoBudget {
					assert.Equal(t, 4*requests, attempts)
					return
				}
				// The floor is counted per started second: the window slides in
				// 1 s slots, so the bound is exact only to a slot.
				limit := 1.1*requests + 10*math.Ceil(elapsed.Seconds())
				assert.LessOrEqual(t, float64(attempts), limit)
				assert.Greater(t, attempts, requests+requests/20, "the budget still allows some retries")
			})
		})
	}
}

func TestTransportBudgetGiveUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := NewBudget(0, 0.2) // two retries per 10s window
		base := script(status(503))
		var events []RetryEvent
		tr := &Transport{Base: base, Budget: b, Policy: Policy{Jitter: NoJitter}, OnRetry: func(e RetryEvent) { events = append(events, e) }}
		start := time.Now()
		resp, err := tr.RoundTrip(newReq(t, "GET", "", nil))
		require.NoError(t, err)
		assert.Equal(t, 503, resp.StatusCode, "the caller gets the last response")
		assert.Equal(t, 3, base.attempts())
		require.Len(t, events, 3)
		assert.Equal(t, ReasonBudget, events[2].GiveUp)
		assert.Equal(t, 600*time.Millisecond, time.Since(start), "no wait once the budget is empty")

		// A second Transport sharing the budget gets nothing either.
		base2 := script(status(503))
		resp, err = (&Transport{Base: base2, Budget: b}).RoundTrip(newReq(t, "GET", "", nil))
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, 1, base2.attempts())
	})
}

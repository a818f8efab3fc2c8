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

func TestBudgetZeroNoAndBad(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// The zero Budget is the default: 10% plus 10/s over 10s, so 100
		// retries from the floor alone.
		var zero Budget
		n := 0
		for zero.withdraw(mono(), false) {
			n++
		}
		assert.Equal(t, 100, n)
		for range 1000 {
			require.True(t, NoBudget.withdraw(mono(), false))
		}
	})
	for _, bad := range []BudgetOptions{{Ratio: -0.1}, {MinPerSecond: -1}, {Ratio: math.NaN()}, {MinPerSecond: math.Inf(1)}, {Window: -time.Second}} {
		b, err := NewBudget(bad)
		assert.Error(t, err, "%+v", bad)
		assert.Nil(t, b)
	}
	_, err := NewBudget(BudgetOptions{Ratio: -1})
	assert.EqualError(t, err, "retryhttp: NewBudget: Ratio -1 must be a finite number >= 0")
}

func mustBudget(t testing.TB, s BudgetOptions) *Budget {
	b, err := NewBudget(s)
	require.NoError(t, err)
	return b
}

// TestBudgetUnderFullOutage: 10,000 requests at 100/s against a base that
// always answers 503. Without a budget every request makes 4 attempts; with
// the default budget the total stays within 1.1 × requests + floor × time.
func TestBudgetUnderFullOutage(t *testing.T) {
	for _, tc := range []struct {
		name   string
		budget *Budget
	}{{"default budget", nil}, {"explicit 10%, 10/s", mustBudget(t, BudgetOptions{Ratio: 0.1, MinPerSecond: 10})}, {"no budget", NoBudget}} {
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
				// 1 s slots, so the bound is exact only to a slot, and where the
				// slots fall against the start can give the first window's
				// reserve (10/s × 10 s) twice.
				limit := 1.1*requests + 10*math.Ceil(elapsed.Seconds()) + 100
				assert.LessOrEqual(t, float64(attempts), limit)
				assert.Greater(t, attempts, requests+requests/20, "the budget still allows some retries")
			})
		})
	}
}

func TestTransportBudgetGiveUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := mustBudget(t, BudgetOptions{Ratio: 1e-9, MinPerSecond: 0.2}) // two retries per 10s window
		base := script(status(503))
		var events []Event
		tr := &Transport{Base: base, Budget: b, Policy: Policy{Jitter: JitterNone}, Hooks: []Hook{retryHook(func(e Event) { events = append(events, e) })}}
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

// ThrottleCost charges a retry after a throttling answer its share of a
// token: with a reserve of 10 tokens, 10 retries after failures, or 40
// at a cost of 0.25 after 429s.
func TestBudgetThrottleCost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		count := func(b *Budget, throttled bool) int {
			n := 0
			for b.withdraw(mono(), throttled) {
				n++
			}
			return n
		}
		s := BudgetOptions{Ratio: 1e-9, MinPerSecond: 1, Window: 10 * time.Second, ThrottleCost: 0.25}
		assert.Equal(t, 10, count(mustBudget(t, s), false), "retries after failures")
		assert.Equal(t, 40, count(mustBudget(t, s), true), "retries after throttling answers")
		s.ThrottleCost = 0
		assert.Equal(t, 10, count(mustBudget(t, s), true), "retries after throttling answers, ThrottleCost 0")
	})
	for _, bad := range []float64{-1, math.NaN(), math.Inf(1)} {
		_, err := NewBudget(BudgetOptions{ThrottleCost: bad})
		assert.ErrorContains(t, err, "ThrottleCost", "%v", bad)
	}
}

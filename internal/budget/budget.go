// Package budget is the retry budget's mechanism, with time passed in, so
// that retryhttp.Budget and the retrystorm simulator share it.
//
// It is Finagle's RetryBudget: every logical request deposits ratio of a
// token, every retry withdraws one, deposits and withdrawals expire after
// the window, and a fixed reserve of floor × window tokens lets a quiet
// client retry its occasional failure.
package budget

import (
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// Slots is the number of slots the window is divided into: deposits and
// withdrawals expire one slot at a time.
const Slots = 10

const unitsPerToken = 1_000_000

// Budget is safe for concurrent use. Deposits, one per request, are
// lock-free: an atomic add to the current slot. Withdrawals, one per retry
// and so rare, hold mu, which also guards turning a slot over to a new
// epoch. A deposit racing a turnover can land in the slot just reset; that
// loses one deposit, which errs on the side of fewer retries.
type Budget struct {
	deposit   int64 // units a request deposits: ratio × unitsPerToken
	reserve   int64 // units always available: floor × window
	slotWidth int64 // nanoseconds

	mu    sync.Mutex
	slots [Slots]slot
}

// slot holds the net units deposited during one slot of time.
type slot struct {
	epoch atomic.Int64 // slot number: time / slotWidth
	units atomic.Int64
	_     [48]byte // keep slots on separate cache lines
}

// New returns a budget that lets retries add ratio of the requests seen over
// window, plus floor retries per second. The caller validates the values:
// finite, ratio and floor >= 0, window > 0.
func New(ratio, floor float64, window time.Duration) *Budget {
	return &Budget{
		deposit:   int64(math.Round(ratio * unitsPerToken)),
		reserve:   int64(math.Round(floor * window.Seconds() * unitsPerToken)),
		slotWidth: max(1, int64(window/Slots)),
	}
}

// Deposit records one logical request at now.
func (b *Budget) Deposit(now time.Time) {
	if b.deposit == 0 {
		return
	}
	e := b.slotOf(now)
	s := &b.slots[e%Slots]
	if s.epoch.Load() != e {
		b.mu.Lock()
		turnOver(s, e)
		b.mu.Unlock()
	}
	s.units.Add(b.deposit)
}

// Withdraw takes one retry from the budget at now and reports whether there
// was one to take.
func (b *Budget) Withdraw(now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	e := b.slotOf(now)
	if b.balance(e) < unitsPerToken {
		return false
	}
	s := &b.slots[e%Slots]
	turnOver(s, e)
	s.units.Add(-unitsPerToken)
	return true
}

// Available reports how many retries the budget would allow at now.
func (b *Budget) Available(now time.Time) float64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return float64(b.balance(b.slotOf(now))) / unitsPerToken
}

func (b *Budget) slotOf(now time.Time) int64 { return now.UnixNano() / b.slotWidth }

// balance is the reserve plus the units of the slots inside the window that
// ends with slot e. b.mu must be held.
func (b *Budget) balance(e int64) int64 {
	sum := b.reserve
	for i := range b.slots {
		s := &b.slots[i]
		if age := e - s.epoch.Load(); age >= 0 && age < Slots {
			sum += s.units.Load()
		}
	}
	return sum
}

// turnOver makes s the slot of epoch e, dropping what an earlier epoch left
// in it. Time that goes backwards leaves a newer slot alone. The budget's mu
// must be held.
func turnOver(s *slot, e int64) {
	if s.epoch.Load() < e {
		s.units.Store(0)
		s.epoch.Store(e)
	}
}

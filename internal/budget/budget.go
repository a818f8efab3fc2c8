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
	b := &Budget{
		deposit:   int64(math.Round(ratio * unitsPerToken)),
		reserve:   int64(math.Round(floor * window.Seconds() * unitsPerToken)),
		slotWidth: max(1, int64(window/Slots)),
	}
	for i := range b.slots {
		b.slots[i].epoch.Store(math.MinInt64) // no epoch yet: any reading turns it over
	}
	return b
}

// Deposit records one logical request at now, any monotonic clock's
// reading (the Transport's is the time since the process started; the
// simulator's, virtual time).
func (b *Budget) Deposit(now time.Duration) {
	if b.deposit == 0 {
		return
	}
	e := b.slotOf(now)
	s := b.slot(e)
	if s.epoch.Load() != e {
		b.mu.Lock()
		turnOver(s, e)
		b.mu.Unlock()
	}
	s.units.Add(b.deposit)
}

// Withdraw takes one retry from the budget at now and reports whether there
// was one to take.
func (b *Budget) Withdraw(now time.Duration) bool { return b.WithdrawCost(now, 1) }

// WithdrawCost takes a retry that costs cost tokens (a share of one, or
// more) from the budget at now, and reports whether the budget held that
// much.
func (b *Budget) WithdrawCost(now time.Duration, cost float64) bool {
	units := int64(math.Round(cost * unitsPerToken))
	b.mu.Lock()
	defer b.mu.Unlock()
	e := b.slotOf(now)
	if b.balance(e) < units {
		return false
	}
	s := b.slot(e)
	turnOver(s, e)
	s.units.Add(-units)
	return true
}

// Available reports how many retries the budget would allow at now.
func (b *Budget) Available(now time.Duration) float64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return float64(b.balance(b.slotOf(now))) / unitsPerToken
}

func (b *Budget) slotOf(now time.Duration) int64 { return int64(now) / b.slotWidth }

// slot is the slot that epoch e uses. An epoch may be negative (a clock
// reading before its anchor, a test's fake clock): as an unsigned number
// consecutive epochs still use consecutive slots.
func (b *Budget) slot(e int64) *slot { return &b.slots[uint64(e)%Slots] }

// balance is the reserve plus the units of the slots inside the window that
// ends with slot e. b.mu must be held.
func (b *Budget) balance(e int64) int64 {
	sum := b.reserve
	for i := range b.slots {
		s := &b.slots[i]
		if ep := s.epoch.Load(); ep <= e && ep > e-Slots {
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

package retryhttp

import (
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// Budget caps retries at a fraction of first attempts, so that a long
// outage cannot multiply the load on the failing dependency.
//
// Backoff spreads retries out in time but does not bound how many there
// are: with 4 attempts per call, a dependency that is down receives 4 times
// its normal traffic, and 3 layers that each retry 3 times turn one click
// into 27 requests. A Budget lets retries add at most ratio of the first
// attempts seen over the last 10 seconds, plus minRetriesPerSecond so that a
// quiet client can still retry its occasional failure.
//
// It is Finagle's RetryBudget: every logical request deposits ratio of a
// token, every retry withdraws one, deposits and withdrawals expire after
// the window, and a fixed reserve of minRetriesPerSecond × window tokens
// stands for the floor. We chose it over gRPC's retryThrottling (a token
// bucket that drains on failures and refills on successes) because its bound
// is stated in traffic, "at most 10% extra load", which is what an operator
// sizes capacity with, and because it needs no notion of success.
//
// A Budget is safe for concurrent use; one *Budget may be shared by several
// Transports calling the same dependency, so that together they stay within
// it. Use NewBudget; the zero Budget allows no retries.
type Budget struct {
	deposit  int64 // units a request deposits: ratio × unitsPerToken
	reserve  int64 // units always available: floor × window
	disabled bool

	// Deposits, one per request, are lock-free: an atomic add to the
	// current slot. Withdrawals, one per retry and so rare, hold mu, which
	// also guards turning a slot over to a new second. A deposit racing a
	// turnover can land in the slot just reset; that loses one deposit,
	// which errs on the side of fewer retries.
	mu    sync.Mutex
	slots [budgetSlots]budgetSlot
}

// budgetSlot holds the net units deposited during one slot of time.
type budgetSlot struct {
	epoch atomic.Int64 // slot number: time / slotWidth
	units atomic.Int64
	_     [48]byte // keep slots on separate cache lines
}

const (
	budgetWindow  = 10 * time.Second
	budgetSlots   = 10
	slotWidth     = budgetWindow / budgetSlots
	unitsPerToken = 1_000_000
)

// NoBudget, set as Transport.Budget, lets the Transport retry without a
// budget: only Policy bounds it.
var NoBudget = &Budget{disabled: true}

// NewBudget returns a budget that lets retries add at most ratio (0.1 = 10%)
// of the requests seen over a 10 s window, plus minRetriesPerSecond. It
// panics if either is negative, infinite or NaN: a budget that cannot be
// met is a programming error, like a negative time.NewTicker period.
func NewBudget(ratio, minRetriesPerSecond float64) *Budget {
	if !(ratio >= 0) || math.IsInf(ratio, 0) {
		panic(fmt.Sprintf("retryhttp: NewBudget: ratio %v must be a finite number >= 0", ratio))
	}
	if !(minRetriesPerSecond >= 0) || math.IsInf(minRetriesPerSecond, 0) {
		panic(fmt.Sprintf("retryhttp: NewBudget: minRetriesPerSecond %v must be a finite number >= 0", minRetriesPerSecond))
	}
	return &Budget{
		deposit: int64(math.Round(ratio * unitsPerToken)),
		reserve: int64(math.Round(minRetriesPerSecond * budgetWindow.Seconds() * unitsPerToken)),
	}
}

// defaultBudget is what a Transport with a nil Budget uses.
func defaultBudget() *Budget { return NewBudget(0.1, 10) }

// Deposit records one logical request at now. The Transport calls it once
// per RoundTrip; a simulator may call it with virtual time.
func (b *Budget) Deposit(now time.Time) {
	if b.disabled || b.deposit == 0 {
		return
	}
	e := slotOf(now)
	s := &b.slots[e%budgetSlots]
	if s.epoch.Load() != e {
		b.mu.Lock()
		b.turnOver(s, e)
		b.mu.Unlock()
	}
	s.units.Add(b.deposit)
}

// Withdraw takes one retry from the budget at now and reports whether there
// was one to take. A false means the retry must not be sent.
func (b *Budget) Withdraw(now time.Time) bool {
	if b.disabled {
		return true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	e := slotOf(now)
	if b.balance(e) < unitsPerToken {
		return false
	}
	s := &b.slots[e%budgetSlots]
	b.turnOver(s, e)
	s.units.Add(-unitsPerToken)
	return true
}

// Available reports how many retries the budget would allow at now.
func (b *Budget) Available(now time.Time) float64 {
	if b.disabled {
		return math.Inf(1)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return float64(b.balance(slotOf(now))) / unitsPerToken
}

func slotOf(now time.Time) int64 { return now.UnixNano() / int64(slotWidth) }

// balance is the reserve plus the units of the slots inside the window that
// ends with slot e. b.mu must be held.
func (b *Budget) balance(e int64) int64 {
	sum := b.reserve
	for i := range b.slots {
		s := &b.slots[i]
		if age := e - s.epoch.Load(); age >= 0 && age < budgetSlots {
			sum += s.units.Load()
		}
	}
	return sum
}

// turnOver makes s the slot of epoch e, dropping what an earlier epoch left
// in it. Time that goes backwards leaves a newer slot alone. b.mu must be
// held.
func (b *Budget) turnOver(s *budgetSlot, e int64) {
	if s.epoch.Load() < e {
		s.units.Store(0)
		s.epoch.Store(e)
	}
}

package retryhttp

import (
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/retryhttp/retryhttp/internal/budget"
	"github.com/retryhttp/retryhttp/internal/defaults"
)

// Budget caps retries at a share of first attempts, so that a long outage
// cannot multiply the load on the failing dependency.
//
// Backoff spreads retries out in time but does not bound how many there
// are: with 4 attempts per call, a dependency that is down receives 4 times
// its normal traffic, and 3 layers that each retry 3 times turn one click
// into 27 requests. A Budget lets retries add at most Ratio of the logical
// requests seen over the last Window, plus MinPerSecond so that a quiet
// client can still retry its occasional failure.
//
// It is Finagle's RetryBudget: every logical request deposits Ratio of a
// token, every retry withdraws one, deposits and withdrawals expire after
// the window, and a fixed reserve of MinPerSecond × Window tokens stands for
// the floor. We chose it over gRPC's retryThrottling (a token bucket that
// drains on failures and refills on successes) because its bound is stated
// in traffic, "at most 10% extra load", which is what an operator sizes
// capacity with, and because it needs no notion of success.
//
// The zero Budget is the default budget (10% plus 10 retries/s over 10 s),
// which is also what a Transport with a nil Budget uses; NoBudget turns the
// cap off. A Budget is safe for concurrent use; share one *Budget among the
// Transports that call the same dependency, so that together they stay
// within it. A Budget must not be copied after first use.
type Budget struct {
	settings BudgetOptions
	off      bool
	once     sync.Once
	b        atomic.Pointer[budget.Budget] // set once, by init
}

// BudgetOptions configure a Budget. Each zero field takes the default in
// its comment.
type BudgetOptions struct {
	// Ratio is the share of logical requests that may be retried: 0.1 lets
	// retries add 10% to the load. 0 means 0.1.
	Ratio float64
	// MinPerSecond is the floor: retries per second allowed whatever the
	// traffic. 0 means 10.
	MinPerSecond float64
	// Window is how long a request's deposit and a retry's withdrawal
	// count. 0 means 10s.
	Window time.Duration
	// ThrottleCost is what a retry after a throttling answer withdraws (a
	// 429, or a response whose server named a wait: Retry-After, a
	// rate-limit header), in retries after a failure: 5.0/14 makes a
	// throttled retry cost 5 where a failed attempt's retry costs 14, as
	// the AWS SDKs' retry quota charges them. 0 means 1: both cost alike.
	// A server that throttles protects itself and says when to come back,
	// so its retries may be cheaper; one that fails may be failing for
	// everyone, and its retries are the storm the budget exists to cap.
	ThrottleCost float64
}

// NoBudget, set as Transport.Budget, lets the Transport retry without a
// budget: only the Policy bounds it.
var NoBudget = &Budget{off: true}

// NewBudget returns a budget with the given settings. A negative, infinite
// or NaN value is an error.
func NewBudget(s BudgetOptions) (*Budget, error) {
	if err := s.validate(); err != nil {
		return nil, err
	}
	b := &Budget{settings: s}
	b.init()
	return b, nil
}

func (s BudgetOptions) validate() error {
	switch {
	case !(s.Ratio >= 0) || math.IsInf(s.Ratio, 0):
		return fmt.Errorf("retryhttp: NewBudget: Ratio %v must be a finite number >= 0", s.Ratio)
	case !(s.MinPerSecond >= 0) || math.IsInf(s.MinPerSecond, 0):
		return fmt.Errorf("retryhttp: NewBudget: MinPerSecond %v must be a finite number >= 0", s.MinPerSecond)
	case s.Window < 0:
		return fmt.Errorf("retryhttp: NewBudget: Window %v is negative", s.Window)
	case !(s.ThrottleCost >= 0) || math.IsInf(s.ThrottleCost, 0):
		return fmt.Errorf("retryhttp: NewBudget: ThrottleCost %v must be a finite number >= 0", s.ThrottleCost)
	}
	return nil
}

// get returns the mechanism, resolving the defaults on first use (a zero
// Budget gets them then).
func (b *Budget) get() *budget.Budget {
	if bb := b.b.Load(); bb != nil {
		return bb
	}
	return b.init()
}

// init resolves the defaults once, and returns the mechanism.
func (b *Budget) init() *budget.Budget {
	b.once.Do(func() {
		s := b.settings
		if s.Ratio == 0 {
			s.Ratio = defaults.BudgetRatio
		}
		if s.MinPerSecond == 0 {
			s.MinPerSecond = defaults.BudgetMinPerSecond
		}
		if s.Window == 0 {
			s.Window = defaults.BudgetWindow
		}
		b.b.Store(budget.New(s.Ratio, s.MinPerSecond, s.Window))
	})
	return b.b.Load()
}

// deposit records one logical request at now (mono time).
func (b *Budget) deposit(now time.Duration) {
	if b.off {
		return
	}
	b.get().Deposit(now)
}

// withdraw takes one retry at now (mono time), after a throttling answer
// if throttled, and reports whether there was one to take.
func (b *Budget) withdraw(now time.Duration, throttled bool) bool {
	if b.off {
		return true
	}
	if throttled && b.settings.ThrottleCost != 0 {
		return b.get().WithdrawCost(now, b.settings.ThrottleCost)
	}
	return b.get().Withdraw(now)
}

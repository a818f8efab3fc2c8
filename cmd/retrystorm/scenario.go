package main

import (
	"fmt"
	"time"

	"github.com/retryhttp/retryhttp"
	"github.com/retryhttp/retryhttp/internal/defaults"
)

// binWidth is the resolution of every load measurement: requests arriving
// at the server per 100 ms.
const binWidth = 100 * time.Millisecond

// scenario describes one experiment; the same values drive the live run
// and the simulation. Every field can be set from a flag.
type scenario struct {
	name string

	clients  int           // closed loop: clients that start together, one request each
	rate     float64       // open loop: logical requests per second (Poisson arrivals)
	uniform  bool          // open loop: evenly spaced arrivals instead (a fluid model)
	duration time.Duration // open loop: how long requests keep arriving
	runFor   time.Duration // how long the run is watched; 0: until every request has ended

	outageAt time.Duration // when the trigger starts
	outage   time.Duration // for how long
	slow     float64       // during the trigger the server works at this share of its capacity (0: down)

	capacity   int     // requests per second the server can serve
	rejectCost float64 // reject model: share of a served request's cost that a rejection costs
	queue      bool    // the server queues work (FIFO at its capacity) instead of rejecting past it

	delay, spread  time.Duration // one-way network delay: |Normal(delay, spread)|
	attemptTimeout time.Duration // the client gives up on an attempt after this (0: never)
	deadline       time.Duration // each logical request's deadline, from its start

	attempts   int           // Policy.MaxAttempts (0: unlimited)
	base, cap  time.Duration // Policy.BaseDelay, Policy.MaxDelay
	fixed      time.Duration // the fixed-delay strategy's wait
	budget     budgetConfig  // the budget strategies'
	budgetEach bool          // one budget per client instead of one shared
	throttling bool          // reject model: a rejection is a throttling answer (429), not a failure (503)
}

// budgetConfig are a retry budget's numbers.
type budgetConfig struct {
	ratio, floor float64
	window       time.Duration
}

var defaultBudget = budgetConfig{defaults.BudgetRatio, defaults.BudgetMinPerSecond, defaults.BudgetWindow}

// recovery is when the trigger ends.
func (s scenario) recovery() time.Duration { return s.outageAt + s.outage }

// outageScenario: a service comes back after an outage and every client
// that timed out retries at once.
func outageScenario(clients int, outage time.Duration, capacity int) scenario {
	return scenario{
		name: "outage", clients: clients, outage: outage, capacity: capacity, rejectCost: 0.1,
		delay: time.Millisecond, deadline: outage + 2*time.Second,
		attempts: 10, base: 100 * time.Millisecond, cap: time.Second, fixed: 250 * time.Millisecond,
		budget: defaultBudget,
	}
}

// rejectingScenario: demand at three times capacity for 10 s, every
// rejection costing 30% of a served request: the SRE book's case for
// client-side throttling (ch. 21). A budget caps what retries add; only
// the Throttle sheds the first attempts the server would reject anyway,
// and leaves it the capacity to serve the rest.
func rejectingScenario(capacity int) scenario {
	return scenario{
		name: "rejecting", rate: 3 * float64(capacity), duration: 10 * time.Second, capacity: capacity, rejectCost: 0.3,
		outageAt: time.Hour, delay: time.Millisecond, deadline: 5 * time.Second,
		attempts: 6, base: 50 * time.Millisecond, cap: time.Second, fixed: 250 * time.Millisecond,
		budget: defaultBudget,
	}
}

// overloadScenario: open-loop load at 90% of capacity, an outage, and the
// question of Bronson et al. (HotOS 2021): does the system recover, or do
// the retries it caused keep it down? Rejections cost 30% of a served
// request, so a retry storm eats into capacity. The run lasts long enough
// after the outage to see it settle.
func overloadScenario(capacity int, outage time.Duration) scenario {
	return scenario{
		name: "overload", rate: 0.9 * float64(capacity), outageAt: 3 * time.Second, outage: outage,
		duration: 3*time.Second + outage + 6*time.Second, capacity: capacity, rejectCost: 0.3,
		delay: time.Millisecond, deadline: 5 * time.Second,
		attempts: 6, base: 50 * time.Millisecond, cap: time.Second, fixed: 250 * time.Millisecond,
		budget: defaultBudget,
	}
}

// contentionScenario: the optimistic-concurrency race of the AWS
// "Exponential Backoff and Jitter" study, run in its simulator's model (see
// occ.go).
func contentionScenario(clients int) scenario {
	return scenario{
		name: "contention", clients: clients,
		delay: 10 * time.Millisecond, spread: 2 * time.Millisecond, deadline: time.Hour,
		base: 5 * time.Millisecond, cap: 2 * time.Second, fixed: 5 * time.Millisecond, budget: defaultBudget,
	}
}

// strategy is one way of retrying.
type strategy struct {
	name     string
	policy   retryhttp.Policy
	budget   bool // retries draw from the scenario's budget
	throttle bool // attempts pass a Throttle (K 2, a throttleWindow window), shared by the clients
	shed     bool // the queueing server sheds what is over an adaptive limit, as an overload.Shedder does
	limit    bool // attempts pass one client-side concurrency limit (an overload.Limiter refusing at once), shared by the clients

	// throttleCost is BudgetOptions.ThrottleCost: what a retry after a
	// throttling answer withdraws. 0 means 1.
	throttleCost float64
}

// throttleWindow is the Throttle's window in the demo's scenarios, which
// last seconds: the SRE book's two minutes scaled to them.
const throttleWindow = 10 * time.Second

// strategies are the contenders, from worst to best practice.
func (s scenario) strategies() []strategy {
	attempts := s.attempts
	if attempts == 0 {
		attempts = 1 << 30
	}
	p := func(base, cap time.Duration, j retryhttp.Jitter) retryhttp.Policy {
		return retryhttp.Policy{MaxAttempts: attempts, BaseDelay: base, MaxDelay: cap, Jitter: j, MaxElapsed: s.deadline + time.Hour}
	}
	return []strategy{
		{name: "no backoff", policy: p(time.Nanosecond, time.Nanosecond, retryhttp.JitterNone)},
		{name: "fixed delay", policy: p(s.fixed, s.fixed, retryhttp.JitterNone)},
		{name: "exponential", policy: p(s.base, s.cap, retryhttp.JitterNone)},
		{name: "full jitter", policy: p(s.base, s.cap, retryhttp.JitterFull)},
		{name: "equal jitter", policy: p(s.base, s.cap, retryhttp.JitterEqual)},
		{name: "decorrelated", policy: p(s.base, s.cap, retryhttp.JitterDecorrelated)},
		{name: "full jitter+budget", policy: p(s.base, s.cap, retryhttp.JitterFull), budget: true},
		{name: "full jitter+budget+throttle", policy: p(s.base, s.cap, retryhttp.JitterFull), budget: true, throttle: true},
	}
}

func (s scenario) String() string {
	server := "rejects past capacity"
	if s.queue {
		server = "queues at capacity"
	}
	switch s.name {
	case "contention":
		return fmt.Sprintf("contention: %d clients race to write one versioned row, |N(%v, %v)| per hop, base %v, cap %v",
			s.clients, s.delay, s.spread, s.base, s.cap)
	}
	if s.rate > 0 && s.outage == 0 {
		return fmt.Sprintf("%s: %.0f req/s open loop for %v against capacity %d/s (%s), rejections costing %.0f%% of a served request; %d attempts, deadline %v",
			s.name, s.rate, s.duration, s.capacity, server, 100*s.rejectCost, s.attempts, s.deadline)
	}
	if s.rate > 0 {
		return fmt.Sprintf("%s: %.0f req/s open loop for %v against capacity %d/s (%s), trigger %v at %v (capacity x%.2f); %d attempts, deadline %v",
			s.name, s.rate, s.duration, s.capacity, server, s.outage, s.outageAt, s.slow, s.attempts, s.deadline)
	}
	return fmt.Sprintf("%s: %d clients, server down for %v, then capacity %d/s (%s); %d attempts, deadline %v",
		s.name, s.clients, s.outage, s.capacity, server, s.attempts, s.deadline)
}

// result is what one strategy did in one scenario.
type result struct {
	strategy  string
	logical   int            // logical requests
	calls     int            // attempts that reached the server
	succeeded int            // logical requests that succeeded
	giveUps   map[string]int // by reason
	load      []int          // attempts arriving per bin
	wasted    []int          // queue model: work completed per bin for callers that had given up
	started   []int          // logical requests started per bin
	served    []int          // of them, by the bin they started in, those that succeeded
	answered  []answer       // the logical requests that succeeded, in the order they did
	atServer  []answer       // queue model: the attempts the server finished, from their arrival to their reply
	finished  time.Duration  // when the last logical request ended
	recovery  time.Duration  // when the trigger ended
}

// answer is a logical request that succeeded: when it started and how
// long it took, its retries' waits included.
type answer struct{ start, took time.Duration }

// answeredBetween returns, of the logical requests started between from
// and to, how many succeeded per second and their latency's q quantile
// (0 if none did).
func (r result) answeredBetween(from, to time.Duration, q float64) (perSecond float64, latency time.Duration) {
	return between(r.answered, from, to, q)
}

// between returns, of the answers started between from and to, how many
// there were per second and their latency's q quantile (0 if none).
func between(as []answer, from, to time.Duration, q float64) (perSecond float64, latency time.Duration) {
	var took []time.Duration
	for _, a := range as {
		if a.start >= from && a.start < to {
			took = append(took, a.took)
		}
	}
	if len(took) == 0 {
		return 0, 0
	}
	return float64(len(took)) / (to - from).Seconds(), quantile(took, q)
}

func (r result) amplification() float64 {
	if r.logical == 0 {
		return 0
	}
	return float64(r.calls) / float64(r.logical)
}

func (r result) successRate() float64 {
	if r.logical == 0 {
		return 0
	}
	return float64(r.succeeded) / float64(r.logical)
}

// peakAfterRecovery is the largest load in any bin from the recovery on.
func (r result) peakAfterRecovery() int {
	peak := 0
	for i := int(r.recovery / binWidth); i < len(r.load); i++ {
		peak = max(peak, r.load[i])
	}
	return peak
}

// loadBetween is the mean arrivals per second between from and to.
func (r result) loadBetween(from, to time.Duration) float64 {
	a, b := int(from/binWidth), min(int(to/binWidth), len(r.load))
	if b <= a {
		return 0
	}
	n := 0
	for _, v := range r.load[a:b] {
		n += v
	}
	return float64(n) / (float64(b-a) * binWidth.Seconds())
}

// servedBetween is the share of the logical requests started between from
// and to that succeeded.
func (r result) servedBetween(from, to time.Duration) float64 {
	n, ok := 0, 0
	for i := int(from / binWidth); i < min(int(to/binWidth), len(r.started)); i++ {
		n += r.started[i]
		if i < len(r.served) {
			ok += r.served[i]
		}
	}
	if n == 0 {
		return 0
	}
	return float64(ok) / float64(n)
}

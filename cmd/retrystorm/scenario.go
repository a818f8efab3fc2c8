package main

import (
	"fmt"
	"time"

	"github.com/retryhttp/retryhttp"
)

// binWidth is the resolution of every load measurement: requests arriving
// at the server per 100 ms.
const binWidth = 100 * time.Millisecond

// scenario describes one experiment; the same values drive the live run
// and the simulation.
type scenario struct {
	name string

	clients  int           // outage, contention: clients that start together
	rate     float64       // overload: logical requests per second, open loop
	duration time.Duration // overload: how long requests keep arriving

	outageAt time.Duration // when the server goes down
	outage   time.Duration // for how long

	capacity   int           // requests per second the server can serve
	rejectCost float64       // share of a served request's cost that a rejected one costs
	delay      time.Duration // one-way network delay (contention: also the read-to-write gap)
	deadline   time.Duration // each logical request's deadline, from its start

	attempts   int           // Policy.MaxAttempts
	base, cap  time.Duration // Policy.BaseDelay, Policy.MaxDelay
	fixed      time.Duration // the fixed-delay strategy's wait
	contention bool          // optimistic-concurrency writes instead of a capacity limit
}

// recovery is when the server is back up.
func (s scenario) recovery() time.Duration { return s.outageAt + s.outage }

// outageScenario: a service comes back after an outage and every client
// that timed out retries at once.
func outageScenario(clients int, outage time.Duration, capacity int) scenario {
	return scenario{
		name: "outage", clients: clients, outage: outage, capacity: capacity, rejectCost: 0.1,
		delay: time.Millisecond, deadline: outage + 2*time.Second,
		attempts: 10, base: 100 * time.Millisecond, cap: time.Second, fixed: 250 * time.Millisecond,
	}
}

// contentionScenario: the optimistic-concurrency race of the AWS
// "Exponential Backoff and Jitter" study: clients read a versioned row and
// write it back conditionally; a write fails if another landed in between.
func contentionScenario(clients int) scenario {
	return scenario{
		name: "contention", clients: clients, contention: true,
		delay: 10 * time.Millisecond, deadline: 10 * time.Minute,
		attempts: 100_000, base: 5 * time.Millisecond, cap: 2 * time.Second, fixed: 5 * time.Millisecond,
	}
}

// overloadScenario: open-loop load at 90% of capacity, a short outage, and
// the question of Bronson et al. (HotOS 2021): does the system recover, or
// do the retries it caused keep it down? Rejections cost 30% of a served
// request, so a retry storm eats into capacity.
func overloadScenario(capacity int, outage time.Duration) scenario {
	return scenario{
		name: "overload", rate: 0.9 * float64(capacity), duration: 12 * time.Second,
		outageAt: 3 * time.Second, outage: outage, capacity: capacity, rejectCost: 0.3,
		delay: time.Millisecond, deadline: 5 * time.Second,
		attempts: 6, base: 50 * time.Millisecond, cap: time.Second, fixed: 250 * time.Millisecond,
	}
}

// strategy is one way of retrying.
type strategy struct {
	name   string
	policy retryhttp.Policy
	budget bool // all clients share one retry budget (10%, 10/s)
}

// strategies are the contenders, from worst to best practice.
func (s scenario) strategies() []strategy {
	p := func(base, cap time.Duration, j retryhttp.Jitter) retryhttp.Policy {
		return retryhttp.Policy{MaxAttempts: s.attempts, BaseDelay: base, MaxDelay: cap, Jitter: j, MaxElapsed: s.deadline + time.Hour}
	}
	return []strategy{
		{"no backoff", p(time.Nanosecond, time.Nanosecond, retryhttp.NoJitter), false},
		{"fixed delay", p(s.fixed, s.fixed, retryhttp.NoJitter), false},
		{"exponential", p(s.base, s.cap, retryhttp.NoJitter), false},
		{"full jitter", p(s.base, s.cap, retryhttp.FullJitter), false},
		{"equal jitter", p(s.base, s.cap, retryhttp.EqualJitter), false},
		{"decorrelated", p(s.base, s.cap, retryhttp.DecorrelatedJitter), false},
		{"full jitter+budget", p(s.base, s.cap, retryhttp.FullJitter), true},
	}
}

func (s scenario) String() string {
	switch s.name {
	case "overload":
		return fmt.Sprintf("overload: %.0f req/s open loop for %v against capacity %d/s, outage %v at %v",
			s.rate, s.duration, s.capacity, s.outage, s.outageAt)
	case "contention":
		return fmt.Sprintf("contention: %d clients race to write one versioned row, %v network delay, base %v, cap %v",
			s.clients, s.delay, s.base, s.cap)
	}
	return fmt.Sprintf("outage: %d clients, server down for %v, then capacity %d/s; %d attempts, deadline %v",
		s.clients, s.outage, s.capacity, s.attempts, s.deadline)
}

// result is what one strategy did in one scenario.
type result struct {
	strategy  string
	logical   int            // logical requests
	calls     int            // attempts that reached the server
	succeeded int            // logical requests that succeeded
	giveUps   map[string]int // by reason
	load      []int          // attempts arriving per bin
	finished  time.Duration  // when the last logical request ended
	recovery  time.Duration  // when the server came back
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

package main

import (
	"math"
	"math/rand/v2"
	"time"

	"github.com/retryhttp/retryhttp"
	"github.com/retryhttp/retryhttp/internal/backoff"
	"github.com/retryhttp/retryhttp/internal/budget"
	"github.com/retryhttp/retryhttp/internal/defaults"
	"github.com/retryhttp/retryhttp/internal/gradient"
	"github.com/retryhttp/retryhttp/internal/throttle"
	"github.com/retryhttp/retryhttp/overload"
)

// simulate runs a strategy through a scenario in virtual time. The waits
// come from retryhttp's own backoff, the budget is retryhttp's own, fed
// virtual time, and the give-up order is the one Transport.RoundTrip applies
// (attempts, then elapsed, then deadline, then budget), so what it shows is
// what the library does. Deterministic for a seed.
func simulate(sc scenario, st strategy, seed uint64) result {
	if sc.name == "contention" {
		return simulateOCC(sc, st, seed)
	}
	s := newSim(sc, st, seed)
	return s.run()
}

// epoch anchors virtual time for the circuit breaker, which works on
// time.Time.
var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

type sim struct {
	sc       scenario
	st       strategy
	rng      *rand.Rand
	q        eventQueue
	res      result
	cl       []simClient
	shared   *budget.Budget
	throttle *throttle.Host // the strategy's Throttle, shared by the clients
	reject   *capacityServer
	fifo     *queueServer
	shed     *shedder // the strategy's, in front of fifo
	limit    *clientLimit
}

// clientLimit is an overload.Limiter in virtual time, for one host and
// shared by the clients, refusing at once past its limit (Options.Queue
// 0): the same limit, fed each attempt's latency from its send to its
// reply, with the count in flight at its admission, and a drop for a
// timeout or a refusal, as the Transport settles a Permit.
type clientLimit struct {
	g        gradient.Limit
	inflight int
}

// settle ends c's attempt's permit at t.
func (l *clientLimit) settle(c *simClient, t time.Duration, drop bool) {
	if c.admitted == 0 {
		return
	}
	l.g.Update(c.sentAt, t, c.admitted, drop)
	l.inflight--
	c.admitted = 0
}

// shedder is an overload.Shedder in virtual time: the same limit, fed the
// latency of each request it admitted, from its arrival to its reply, and
// the same admission of a Default request (below ShareDefault of the
// limit). A shed request is answered 503 with shedRetryAfter at once.
type shedder struct {
	g        gradient.Limit
	inflight int
	shed     int
}

// shedRetryAfter is the Retry-After of a shed request in these
// scenarios: 1 s, the Shedder's least and the common fixed answer; its
// measured wait is compared with it in backpressure.go.
const shedRetryAfter = time.Second

type simClient struct {
	start    time.Duration
	attempts int           // sent so far; the current attempt's number
	prev     time.Duration // the previous backoff wait, for decorrelated jitter
	waiting  bool          // the current attempt is out: no reply, no timeout yet
	done     bool
	budget   *budget.Budget // its own, when the scenario gives each client one
	sentAt   time.Duration  // when the current attempt was sent
	admitted int            // the count in flight when the client limit admitted the current attempt; 0: not held
}

func newSim(sc scenario, st strategy, seed uint64) *sim {
	s := &sim{sc: sc, st: st, rng: rand.New(rand.NewPCG(seed, 0x5eed))}
	s.res = result{strategy: st.name, giveUps: map[string]int{}, recovery: sc.recovery()}
	if st.budget && !sc.budgetEach {
		s.shared = budget.New(sc.budget.ratio, sc.budget.floor, sc.budget.window)
	}
	if st.throttle {
		s.throttle = throttle.New(throttleWindow, defaults.ThrottleMinRequests)
	}
	if sc.queue {
		s.fifo = &queueServer{capacity: float64(sc.capacity), down: sc.outageAt, up: sc.recovery(), slow: sc.slow}
		if st.shed {
			s.shed = &shedder{g: gradient.New(overload.DefaultInitial, overload.DefaultMin, overload.DefaultMax, overload.DefaultTolerance)}
		}
	} else {
		s.reject = newCapacityServer(sc)
	}
	if st.limit {
		s.limit = &clientLimit{g: gradient.New(overload.DefaultInitial, overload.DefaultMin, overload.DefaultMax, overload.DefaultTolerance)}
	}
	// Logical requests: an open-loop Poisson stream, or clients that all
	// start within 10 ms ("all timed out" still start a few ms apart).
	if sc.rate > 0 {
		for t := time.Duration(0); ; {
			gap := s.rng.ExpFloat64()
			if sc.uniform {
				gap = 1
			}
			t += time.Duration(gap / sc.rate * float64(time.Second))
			if t >= sc.duration {
				break
			}
			s.q.push(event{at: t, client: len(s.cl), kind: evStart})
			s.cl = append(s.cl, simClient{})
		}
	} else {
		for i := range sc.clients {
			s.q.push(event{at: time.Duration(s.rng.Int64N(int64(10 * time.Millisecond))), client: i, kind: evStart})
		}
		s.cl = make([]simClient, sc.clients)
	}
	s.res.logical = len(s.cl)
	if st.budget && sc.budgetEach {
		for i := range s.cl {
			s.cl[i].budget = budget.New(sc.budget.ratio, sc.budget.floor, sc.budget.window)
		}
	}
	return s
}

// netDelay is one hop: |Normal(delay, spread)|.
func (s *sim) netDelay() time.Duration {
	if s.sc.spread == 0 {
		return s.sc.delay
	}
	return time.Duration(math.Abs(float64(s.sc.delay) + s.rng.NormFloat64()*float64(s.sc.spread)))
}

func (s *sim) budgetOf(c *simClient) *budget.Budget {
	if c.budget != nil {
		return c.budget
	}
	return s.shared
}

func (s *sim) run() result {
	for s.q.Len() > 0 {
		e := s.q.pop()
		if s.sc.runFor > 0 && e.at > s.sc.runFor {
			break
		}
		c := &s.cl[e.client]
		switch e.kind {
		case evStart:
			c.start = e.at
			s.res.started = grow(s.res.started, int(e.at/binWidth))
			s.res.started[int(e.at/binWidth)]++
			if b := s.budgetOf(c); b != nil {
				b.Deposit(e.at)
			}
			s.send(c, e.client, e.at)
		case evSendAfterWait:
			s.send(c, e.client, e.at)
		case evArrive:
			s.arrive(e)
		case evDone: // queue model: the server finished an attempt
			s.res.atServer = append(s.res.atServer, answer{start: e.arrived, took: e.at - e.arrived})
			if s.shed != nil {
				s.shed.g.Update(e.arrived, e.at, s.shed.inflight, false)
				s.shed.inflight--
			}
			if !c.waiting || e.attempt != c.attempts || c.done {
				s.res.wasted = grow(s.res.wasted, int(e.at/binWidth))
				s.res.wasted[int(e.at/binWidth)]++
			}
			s.q.push(event{at: e.at + s.netDelay(), client: e.client, kind: evReply, ok: true, attempt: e.attempt})
		case evReply:
			if !c.waiting || e.attempt != c.attempts || c.done {
				continue // late: the client stopped waiting for it
			}
			c.waiting = false
			if s.throttle != nil {
				s.throttle.Count(e.ok, simEpoch.Add(e.at))
			}
			if s.limit != nil {
				s.limit.settle(c, e.at, !e.ok)
			}
			if e.ok {
				c.done = true
				s.res.succeeded++
				s.res.answered = append(s.res.answered, answer{start: c.start, took: e.at - c.start})
				s.res.served = grow(s.res.served, int(c.start/binWidth))
				s.res.served[int(c.start/binWidth)]++
				s.res.finished = max(s.res.finished, e.at)
				continue
			}
			s.failed(c, e.client, e.at, e.retryAfter, e.retryAfter > 0 || s.sc.throttling)
		case evTimeout:
			if !c.waiting || e.attempt != c.attempts || c.done {
				continue
			}
			c.waiting = false
			if s.throttle != nil {
				s.throttle.Count(false, simEpoch.Add(e.at))
			}
			if s.limit != nil {
				s.limit.settle(c, e.at, true)
			}
			s.failed(c, e.client, e.at, 0, false)
		}
	}
	if s.fifo != nil {
		s.res.load = s.fifo.load
	} else {
		s.res.load = s.reject.loads()
	}
	s.res.calls = sum(s.res.load)
	return s.res
}

// simEpoch is virtual time's zero, as the Throttle reads it.
var simEpoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// send starts the client's next attempt, unless the Throttle or the
// client limit refuses it: then the client gives up, as the Transport
// does.
func (s *sim) send(c *simClient, id int, at time.Duration) {
	refused := retryhttp.ReasonNone
	switch {
	case s.limit != nil && s.limit.inflight >= int(s.limit.g.Value()):
		refused = retryhttp.ReasonLimited
	case s.throttle != nil && !s.throttle.Allow(defaults.ThrottleK, simEpoch.Add(at), s.rng.Float64):
		refused = retryhttp.ReasonThrottled
	}
	if refused != retryhttp.ReasonNone {
		c.done = true
		s.res.giveUps[refused.String()]++
		s.res.finished = max(s.res.finished, at)
		return
	}
	if s.limit != nil {
		s.limit.inflight++
		c.admitted = s.limit.inflight
	}
	c.sentAt = at
	c.attempts++
	c.waiting = true
	s.q.push(event{at: at + s.netDelay(), client: id, kind: evArrive, attempt: c.attempts})
	if s.sc.attemptTimeout > 0 {
		s.q.push(event{at: at + s.sc.attemptTimeout, client: id, kind: evTimeout, attempt: c.attempts})
	}
}

// arrive is an attempt reaching the server.
func (s *sim) arrive(e event) {
	if s.shed != nil {
		if float64(s.shed.inflight)*100 >= s.shed.g.Value()*gradient.ShareDefault {
			s.shed.shed++
			s.q.push(event{at: e.at + s.netDelay(), client: e.client, kind: evReply, attempt: e.attempt, retryAfter: shedRetryAfter})
			return
		}
		s.shed.inflight++
	}
	if s.fifo != nil {
		s.q.push(event{at: s.fifo.enqueue(e.at), client: e.client, kind: evDone, attempt: e.attempt, arrived: e.at})
		return
	}
	ok := s.reject.admit(e.at)
	s.q.push(event{at: e.at + s.netDelay(), client: e.client, kind: evReply, ok: ok, attempt: e.attempt})
}

// failed decides whether a failed attempt is retried, as
// Transport.RoundTrip does; a server's Retry-After, when it gave one, is
// the wait. After a throttling answer the backoff starts from
// Policy.ThrottleDelay and the budget charges the strategy's
// throttleCost.
func (s *sim) failed(c *simClient, id int, at, retryAfter time.Duration, throttled bool) {
	p := s.st.policy
	base, cost := p.BaseDelay, 1.0
	if throttled && p.ThrottleDelay > 0 {
		base = p.ThrottleDelay
	}
	if throttled && s.st.throttleCost > 0 {
		cost = s.st.throttleCost
	}
	c.prev = backoff.Delay(backoff.Jitter(p.Jitter), base, p.MaxDelay, c.attempts-1, c.prev, s.rng.Float64())
	wait := c.prev
	if retryAfter > 0 {
		wait = retryAfter
	}
	reason := retryhttp.ReasonNone
	switch {
	case c.attempts >= p.MaxAttempts:
		reason = retryhttp.ReasonAttempts
	case at+wait-c.start > p.MaxElapsed:
		reason = retryhttp.ReasonElapsed
	case at+wait > c.start+s.sc.deadline:
		reason = retryhttp.ReasonDeadline
	case s.budgetOf(c) != nil && !s.budgetOf(c).WithdrawCost(at, cost):
		reason = retryhttp.ReasonBudget
	}
	if reason != retryhttp.ReasonNone {
		c.done = true
		s.res.giveUps[reason.String()]++
		s.res.finished = max(s.res.finished, at)
		return
	}
	s.q.push(event{at: at + wait, client: id, kind: evSendAfterWait})
}

type eventKind int

const (
	evStart         eventKind = iota // a logical request begins
	evSendAfterWait                  // a retry's wait is over
	evArrive                         // an attempt reaches the server
	evDone                           // queue model: the server finished an attempt
	evReply                          // the attempt's outcome reaches the client
	evTimeout                        // the client's per-attempt timeout fires
)

type event struct {
	at         time.Duration
	seq        uint64 // ties broken by insertion order, for determinism
	client     int
	kind       eventKind
	ok         bool
	attempt    int
	version    int           // contention: the row version read
	arrived    time.Duration // queue model: when the attempt reached the server
	retryAfter time.Duration // a reply's Retry-After: a shed request's
}

// eventQueue is a min-heap of events by time, then insertion order: a
// binary heap written for the type, so that a push costs no allocation
// (container/heap boxes every element in an interface).
type eventQueue struct {
	items []event
	seq   uint64
}

func (q *eventQueue) Len() int { return len(q.items) }

func (q *eventQueue) less(i, j int) bool {
	a, b := &q.items[i], &q.items[j]
	return a.at < b.at || a.at == b.at && a.seq < b.seq
}

func (q *eventQueue) push(e event) {
	q.seq++
	e.seq = q.seq
	q.items = append(q.items, e)
	for i := len(q.items) - 1; i > 0; {
		parent := (i - 1) / 2
		if !q.less(i, parent) {
			break
		}
		q.items[i], q.items[parent] = q.items[parent], q.items[i]
		i = parent
	}
}

func (q *eventQueue) pop() event {
	top := q.items[0]
	last := len(q.items) - 1
	q.items[0] = q.items[last]
	q.items = q.items[:last]
	for i := 0; ; {
		l, r, m := 2*i+1, 2*i+2, i
		if l < last && q.less(l, m) {
			m = l
		}
		if r < last && q.less(r, m) {
			m = r
		}
		if m == i {
			break
		}
		q.items[i], q.items[m] = q.items[m], q.items[i]
		i = m
	}
	return top
}

func grow(xs []int, i int) []int {
	for len(xs) <= i {
		xs = append(xs, 0)
	}
	return xs
}

package main

import (
	"container/heap"
	"math/rand/v2"
	"time"

	"github.com/retryhttp/retryhttp"
	"github.com/retryhttp/retryhttp/internal/backoff"
	"github.com/retryhttp/retryhttp/internal/budget"
)

// simulate runs a strategy through a scenario in virtual time. The waits
// come from retryhttp's own backoff and the give-up order and
// budget from the same rules Transport.RoundTrip applies (attempts, then
// elapsed, then deadline, then budget), on a retryhttp.Budget fed virtual
// time, so what it shows is what the library does. Deterministic for a
// seed.
func simulate(sc scenario, st strategy, seed uint64) result {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	epoch := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var bud *budget.Budget // nil: no budget
	if st.budget {
		bud = budget.New(retryhttp.DefaultBudgetRatio, retryhttp.DefaultBudgetMinPerSecond, retryhttp.DefaultBudgetWindow)
	}
	res := result{strategy: st.name, giveUps: map[string]int{}, recovery: sc.recovery()}

	var q eventQueue
	// Logical requests: all together, or an open-loop stream.
	if sc.rate > 0 {
		n := int(sc.rate * sc.duration.Seconds())
		for i := range n {
			q.push(event{at: time.Duration(float64(i) / sc.rate * float64(time.Second)), client: i, kind: evStart})
		}
		res.logical = n
	} else {
		for i := range sc.clients {
			// Clients that "all timed out" still start a few ms apart.
			q.push(event{at: time.Duration(rng.Int64N(int64(10 * time.Millisecond))), client: i, kind: evStart})
		}
		res.logical = sc.clients
	}
	clients := make([]simClient, res.logical)
	capSrv := newCapacityServer(sc)
	casSrv := &casServer{}

	for q.Len() > 0 {
		e := q.pop()
		c := &clients[e.client]
		switch e.kind {
		case evStart:
			c.start = e.at
			if bud != nil {
				bud.Deposit(epoch.Add(e.at))
			}
			q.push(event{at: e.at, client: e.client, kind: evSend})
		case evSend:
			c.attempts++
			res.calls++
			arrive := e.at + sc.delay
			if sc.contention {
				q.push(event{at: arrive + sc.delay, client: e.client, kind: evCommit, readAt: arrive})
				continue
			}
			ok := capSrv.admit(arrive)
			q.push(event{at: arrive + sc.delay, client: e.client, kind: evReply, ok: ok})
		case evCommit:
			ok := casSrv.write(e.readAt, e.at)
			q.push(event{at: e.at + sc.delay, client: e.client, kind: evReply, ok: ok})
		case evReply:
			if e.ok {
				res.succeeded++
				res.finished = max(res.finished, e.at)
				continue
			}
			p := st.policy
			c.backoff = backoff.Delay(backoff.Jitter(p.Jitter), p.BaseDelay, p.MaxDelay, c.attempts-1, c.backoff, rng.Float64())
			wait := c.backoff
			reason := retryhttp.ReasonNone
			switch {
			case c.attempts >= st.policy.MaxAttempts:
				reason = retryhttp.ReasonAttempts
			case e.at+wait-c.start > st.policy.MaxElapsed:
				reason = retryhttp.ReasonElapsed
			case e.at+wait > c.start+sc.deadline:
				reason = retryhttp.ReasonDeadline
			case bud != nil && !bud.Withdraw(epoch.Add(e.at)):
				reason = retryhttp.ReasonBudget
			}
			if reason != retryhttp.ReasonNone {
				res.giveUps[reason.String()]++
				res.finished = max(res.finished, e.at)
				continue
			}
			q.push(event{at: e.at + wait, client: e.client, kind: evSend})
		}
	}
	if sc.contention {
		res.load = casSrv.loads()
	} else {
		res.load = capSrv.loads()
	}
	return res
}

type simClient struct {
	start    time.Duration
	attempts int
	backoff  time.Duration
}

type eventKind int

const (
	evStart  eventKind = iota // a logical request begins
	evSend                    // an attempt leaves the client
	evCommit                  // contention: the conditional write reaches the row
	evReply                   // the attempt's outcome reaches the client
)

type event struct {
	at     time.Duration
	seq    uint64 // ties broken by insertion order, for determinism
	client int
	kind   eventKind
	ok     bool
	readAt time.Duration
}

// eventQueue is a min-heap of events by time, then insertion order.
type eventQueue struct {
	items []event
	seq   uint64
}

func (q *eventQueue) Len() int { return len(q.items) }
func (q *eventQueue) Less(i, j int) bool {
	a, b := q.items[i], q.items[j]
	return a.at < b.at || a.at == b.at && a.seq < b.seq
}
func (q *eventQueue) Swap(i, j int) { q.items[i], q.items[j] = q.items[j], q.items[i] }
func (q *eventQueue) Push(x any)    { q.items = append(q.items, x.(event)) }
func (q *eventQueue) Pop() any {
	e := q.items[len(q.items)-1]
	q.items = q.items[:len(q.items)-1]
	return e
}

func (q *eventQueue) push(e event) {
	q.seq++
	e.seq = q.seq
	heap.Push(q, e)
}

func (q *eventQueue) pop() event { return heap.Pop(q).(event) }

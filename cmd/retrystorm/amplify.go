package main

import (
	"math"
	"math/rand/v2"
	"time"

	"github.com/retryhttp/retryhttp/internal/budget"
	"github.com/retryhttp/retryhttp/internal/circuit"
)

// ampConfig is the retry-amplification model of Marc Brooker's "Fixing
// retries with token buckets and circuit breakers" (2022): clients whose
// calls arrive as Poisson processes, hops of exponentially distributed
// latency, and each attempt failing independently with probability p. It
// measures load: attempts per first try.
type ampConfig struct {
	clients  int
	rate     float64       // calls per second, all clients together
	p        float64       // each attempt fails with this probability
	attempts int           // attempts per call, the first included
	hop      time.Duration // mean latency of one hop
	runFor   time.Duration
	limit    ampLimit
	budget   budgetConfig     // for limitBudget: one budget per client
	breaker  circuit.Settings // for limitBreaker: one circuit per client
}

// ampLimit is what stands between a failed attempt and its retry.
type ampLimit int

const (
	limitNone    ampLimit = iota // retry up to attempts
	limitBudget                  // each client's retryhttp budget must allow it
	limitBreaker                 // each client's circuit must be closed (it breaks retries only, as in the post)
)

// amplification runs the model and returns attempts per first try.
func amplification(cfg ampConfig, seed uint64) float64 {
	rng := rand.New(rand.NewPCG(seed, 0xa3b))
	hop := func() time.Duration { return time.Duration(rng.ExpFloat64() * float64(cfg.hop)) }
	type client struct {
		b *budget.Budget
		c *circuit.Circuit
	}
	clients := make([]client, cfg.clients)
	for i := range clients {
		switch cfg.limit {
		case limitBudget:
			clients[i].b = budget.New(cfg.budget.ratio, cfg.budget.floor, cfg.budget.window)
		case limitBreaker:
			clients[i].c = circuit.New(&cfg.breaker, nil)
		}
	}
	var q eventQueue
	perClient := cfg.rate / float64(cfg.clients)
	for i := range clients {
		t := time.Duration(rng.ExpFloat64() / perClient * float64(time.Second))
		q.push(event{at: t, client: i, kind: evStart})
	}
	first, attempts := 0, 0
	var now time.Duration
	clock := func() time.Time { return epoch.Add(now) }
	// send makes an attempt; its outcome arrives after two hops. The
	// circuit's ticket for it, if it has one, waits in tickets under the
	// event's sequence number.
	tickets := map[uint64]circuit.Ticket{}
	send := func(i, n int, ticket *circuit.Ticket) {
		attempts++
		q.push(event{at: now + hop() + hop(), client: i, kind: evReply, ok: rng.Float64() >= cfg.p, attempt: n})
		if ticket != nil {
			tickets[q.seq] = *ticket
		}
	}
	for q.Len() > 0 {
		e := q.pop()
		now = e.at
		if now > cfg.runFor {
			break
		}
		c := &clients[e.client]
		switch e.kind {
		case evStart:
			first++
			if c.b != nil {
				c.b.Deposit(now)
			}
			var tk *circuit.Ticket
			if c.c != nil {
				if t, ok := c.c.Allow(clock); ok {
					tk = &t
				}
			}
			send(e.client, 1, tk)
			next := now + time.Duration(rng.ExpFloat64()/perClient*float64(time.Second))
			q.push(event{at: next, client: e.client, kind: evStart})
		case evReply:
			if t, ok := tickets[e.seq]; ok {
				delete(tickets, e.seq)
				o := circuit.Success
				if !e.ok {
					o = circuit.Failure
				}
				c.c.Report(t, o, clock)
			}
			if e.ok || e.attempt >= cfg.attempts {
				continue
			}
			var tk *circuit.Ticket
			switch cfg.limit {
			case limitBudget:
				if !c.b.Withdraw(now) {
					continue
				}
			case limitBreaker:
				t, ok := c.c.Allow(clock)
				if !ok {
					continue // open: no retry; first tries still go
				}
				tk = &t
			}
			send(e.client, e.attempt+1, tk)
		}
	}
	return float64(attempts) / math.Max(1, float64(first))
}

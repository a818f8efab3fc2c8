package main

import (
	"math"
	"math/rand/v2"
	"time"

	"github.com/retryhttp/retryhttp"
	"github.com/retryhttp/retryhttp/internal/backoff"
	"github.com/retryhttp/retryhttp/internal/budget"
)

// simulateOCC runs one contention race in the model of the AWS study's
// simulator (aws-samples/aws-arch-backoff-simulator, the figures of
// "Exponential Backoff and Jitter", 2015): N clients start at t = 0, each
// wants to update one versioned row once. An attempt is four hops (read
// request, read response carrying the version, write request with it,
// write response), each an independent |Normal(delay, spread)|. A write
// commits only if the row's version is still the one its client read;
// otherwise, after its k-th failure (k from 1), the client waits
// backoff(k) and reads again, its read reaching the server one hop plus
// that wait after the failure. calls counts writes; finished is when the
// last write response arrives. The waits are retryhttp's own backoff, with
// n = k so that the ceiling is base·2^k, as the study's expo(k).
func simulateOCC(sc scenario, st strategy, seed uint64) result {
	rng := rand.New(rand.NewPCG(seed, 0x0cc))
	hop := func() time.Duration {
		return time.Duration(math.Abs(float64(sc.delay) + rng.NormFloat64()*float64(sc.spread)))
	}
	var shared *budget.Budget
	if st.budget {
		shared = budget.New(sc.budget.ratio, sc.budget.floor, sc.budget.window)
	}
	type client struct {
		attempts int
		prev     time.Duration
	}
	clients := make([]client, sc.clients)
	res := result{strategy: st.name, logical: sc.clients, giveUps: map[string]int{}}
	var q eventQueue
	for i := range clients {
		q.push(event{at: hop(), client: i, kind: occRead})
		if shared != nil {
			shared.Deposit(0)
		}
	}
	version := 0
	p := st.policy
	for q.Len() > 0 {
		e := q.pop()
		c := &clients[e.client]
		switch e.kind {
		case occRead: // at the server: answer with the current version
			q.push(event{at: e.at + hop(), client: e.client, kind: occReadReply, version: version})
		case occReadReply: // at the client: write back with the version read
			q.push(event{at: e.at + hop(), client: e.client, kind: occWrite, version: e.version})
		case occWrite: // at the server
			res.calls++
			res.load = grow(res.load, int(e.at/binWidth))
			res.load[int(e.at/binWidth)]++
			ok := e.version == version
			if ok {
				version++
			}
			q.push(event{at: e.at + hop(), client: e.client, kind: occWriteReply, ok: ok})
		case occWriteReply: // at the client
			res.finished = max(res.finished, e.at)
			if e.ok {
				res.succeeded++
				continue
			}
			c.attempts++
			c.prev = backoff.Delay(backoff.Jitter(p.Jitter), p.BaseDelay, p.MaxDelay, c.attempts, c.prev, rng.Float64())
			switch {
			case c.attempts+1 > p.MaxAttempts:
				res.giveUps[retryhttp.ReasonAttempts.String()]++
				continue
			case shared != nil && !shared.Withdraw(e.at):
				res.giveUps[retryhttp.ReasonBudget.String()]++
				continue
			}
			q.push(event{at: e.at + hop() + c.prev, client: e.client, kind: occRead})
		}
	}
	return res
}

// Events of the contention model.
const (
	occRead eventKind = iota + 100
	occReadReply
	occWrite
	occWriteReply
)

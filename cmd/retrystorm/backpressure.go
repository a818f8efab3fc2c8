package main

import (
	"container/heap"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/retryhttp/retryhttp/internal/backlog"
	"github.com/retryhttp/retryhttp/internal/defaults"
	"github.com/retryhttp/retryhttp/internal/gradient"
	"github.com/retryhttp/retryhttp/internal/pace"
)

// This file is backpressure in virtual time, on the library's own rules:
// a client's Pacer against a server that enforces a quota (internal/pace),
// and a Shedder's measured Retry-After against the common fixed 1 s
// (internal/backlog).

// timed is a min-heap of callbacks by time, then by the order pushed, for
// determinism.
type timed struct {
	items []timedItem
	seq   uint64
}

type timedItem struct {
	at  time.Duration
	seq uint64
	do  func(at time.Duration)
}

func (q *timed) Len() int { return len(q.items) }
func (q *timed) Less(i, j int) bool {
	a, b := q.items[i], q.items[j]
	return a.at < b.at || a.at == b.at && a.seq < b.seq
}
func (q *timed) Swap(i, j int) { q.items[i], q.items[j] = q.items[j], q.items[i] }
func (q *timed) Push(x any)    { q.items = append(q.items, x.(timedItem)) }
func (q *timed) Pop() any {
	it := q.items[len(q.items)-1]
	q.items = q.items[:len(q.items)-1]
	return it
}

// at schedules do at t.
func (q *timed) at(t time.Duration, do func(time.Duration)) {
	q.seq++
	heap.Push(q, timedItem{at: t, seq: q.seq, do: do})
}

// run calls the callbacks in order until none is left or the next is
// past end.
func (q *timed) run(end time.Duration) {
	for q.Len() > 0 && q.items[0].at <= end {
		it := heap.Pop(q).(timedItem)
		it.do(it.at)
	}
}

// quotaConfig is a server that allows quota requests in each window (fixed
// windows, as GitHub's and GitLab's) and answers the rest 429, telling on
// every response the requests left and the reset as a Unix time in whole
// seconds; and clients, each sending one request at a time, that offer
// offered times the quota between them, evenly spaced, for windows
// windows.
type quotaConfig struct {
	quota   int
	window  time.Duration
	clients int
	offered float64
	windows int
	paced   bool
	phase   time.Duration // where in a second the windows end
	floor   bool          // the reset is told rounded down, not up
	// processes is how many Pacers the clients are spread over (0: one),
	// as replicas that share one API key pace each on its own responses.
	processes int
	// shared is whether the processes' Pacers share one window, as
	// through a retryhttp.PacerStore: a probe answered in one process
	// wakes none held in another, which ask again every pace.StorePoll.
	shared bool
}

// quotaRun is what the clients of a quotaRun saw.
type quotaRun struct {
	sent, served, tooMany, refused int
}

// runQuota offers c's load to c's server, through one Pacer shared by the
// clients when c.paced. The network takes 5 to 15 ms each way, so that
// replies overtake one another; the windows end 0.3 s into a second, so
// that the reset is told up to 0.7 s late.
func runQuota(c quotaConfig, seed uint64) quotaRun {
	rng := rand.New(rand.NewPCG(seed, 50))
	epoch := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(c.phase)
	wall := func(at time.Duration) time.Time { return epoch.Add(at) }
	oneWay := func() time.Duration {
		return 5*time.Millisecond + time.Duration(rng.Int64N(int64(10*time.Millisecond)))
	}
	end := time.Duration(c.windows) * c.window
	gap := time.Duration(float64(c.window) * float64(c.clients) / (c.offered * float64(c.quota)))
	var (
		q       timed
		run     quotaRun
		procs   = max(1, c.processes)
		ws      = make([]pace.Window, procs)
		current = -1 // the server's window
		used    int
		held    = make([][]func(time.Duration), procs) // clients held for a probe, by process
	)
	if c.shared {
		ws = ws[:1]
	}
	// serve is the server: the request's window, its count, the answer.
	serve := func(at time.Duration) (ok bool, remaining int, reset time.Time) {
		k := int(at / c.window)
		if k != current {
			current, used = k, 0
		}
		if ok = used < c.quota; ok {
			used++
		}
		end := wall(time.Duration(k+1) * c.window)
		round := math.Ceil
		if c.floor {
			round = math.Floor
		}
		return ok, c.quota - used, time.Unix(int64(round(float64(end.UnixNano())/1e9)), 0)
	}
	// wake lets the clients held for a probe ask again once it is answered.
	wake := func(at time.Duration, p int) {
		if ws[p%len(ws)].Probing() {
			return
		}
		for _, f := range held[p] {
			q.at(at, f)
		}
		held[p] = held[p][:0]
	}
	var offer func(client int, due time.Duration) func(time.Duration)
	offer = func(client int, due time.Duration) func(time.Duration) {
		p := client % procs
		w := &ws[p%len(ws)]
		// send sends the client's request at, admitted as seq.
		send := func(at time.Duration, seq int64, next time.Duration) {
			q.at(at+oneWay(), func(at time.Duration) {
				ok, remaining, reset := serve(at)
				run.sent++
				q.at(at+oneWay(), func(at time.Duration) {
					if ok {
						run.served++
					} else {
						run.tooMany++
					}
					if c.paced {
						w.Tell(wall(at), seq, pace.Quota{Remaining: int64(remaining), Reset: reset, Coarse: true})
						wake(at, p)
					}
					q.at(max(at, next), offer(client, due+gap))
				})
			})
		}
		return func(at time.Duration) {
			next := max(at, due+gap)
			if !c.paced {
				send(at, 0, next)
				return
			}
			turn, ok := w.Take(wall(at), false, defaults.PacerMaxWait)
			switch {
			case !ok:
				run.refused++
				q.at(next, offer(client, due+gap))
			case turn.Held:
				// Asks again after the wait (MaxWait is longer than the
				// windows here: no wait is refused), or at the probe's
				// answer, whichever is first.
				asked, ask := false, offer(client, due)
				again := func(at time.Duration) {
					if !asked {
						asked = true
						ask(at)
					}
				}
				wait := turn.Wait
				if w.Probing() {
					held[p] = append(held[p], again)
					if c.shared {
						wait = min(wait, pace.StorePoll)
					}
				}
				q.at(at+wait, again)
			case turn.Wait > 0:
				// Sent when its slot comes, if the window still has room.
				q.at(at+turn.Wait, func(at time.Duration) {
					if !w.Confirm(turn.Seq) {
						offer(client, due)(at)
						return
					}
					send(at, turn.Seq, next)
				})
			default:
				send(at, turn.Seq, next)
			}
		}
	}
	for i := range c.clients {
		start := time.Duration(i) * gap / time.Duration(c.clients)
		q.at(start, offer(i, start))
	}
	q.run(end)
	return run
}

// shedConfig is a Shedder whose handler serves limit requests at once,
// each in latency, offered factor times its capacity for burst, evenly
// spaced: one request in six critical, two default, three sheddable, as
// the Shedder's own test offers them. Each client retries a 503 after its
// Retry-After, up to 8 attempts. fixed answers every shed request
// Retry-After: 1, as servers commonly do; otherwise the Shedder's measured
// wait. The limit is pinned (the Shedder's Min and Max), so the latency
// the Shedder measures is the handler's.
type shedConfig struct {
	limit   int
	latency time.Duration
	factor  int
	burst   time.Duration
	fixed   bool
}

// shedRun is what the clients of a shedRun saw.
type shedRun struct {
	retries, reshed         int
	critical, criticalFirst int // critical requests, and those served at their first attempt
	requests, served        int
	lastShed                time.Duration // the server was back to normal from then on
	lastServed              time.Duration
}

// shedQueue and shedMaxWait are the critical requests' queue: how many
// may wait for a slot, and for how long (the Shedder's test's Options).
const (
	shedQueue   = 16
	shedMaxWait = 50 * time.Millisecond
)

// shedWaiter is a critical request in the queue.
type shedWaiter struct {
	serve  func(time.Duration)
	served bool
}

// runShed offers c's burst to c's Shedder.
func runShed(c shedConfig, seed uint64) shedRun {
	rng := rand.New(rand.NewPCG(seed, 51))
	epoch := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var (
		q        timed
		run      shedRun
		inflight int
		horizon  [2]backlog.Horizon // the others', the critical's
		waiting  []*shedWaiter
	)
	retryAfter := func(at time.Duration, critical bool, share int64) time.Duration {
		if c.fixed {
			return time.Second
		}
		h, limit := &horizon[0], max(1, int64(c.limit)*share/100)
		if critical {
			h, limit = &horizon[1], int64(c.limit)
		}
		return time.Duration(h.Wait(epoch.Add(at), backlog.Step(c.latency, limit), rng.Float64(), rng.Float64())) * time.Second
	}
	var release func(at time.Duration)
	release = func(at time.Duration) {
		inflight--
		if len(waiting) > 0 {
			next := waiting[0]
			waiting = waiting[1:]
			next.served = true
			next.serve(at)
			return
		}
	}
	var attempt func(critical bool, share int64, n int) func(time.Duration)
	attempt = func(critical bool, share int64, n int) func(time.Duration) {
		return func(at time.Duration) {
			if n > 1 {
				run.retries++
			}
			served := func(at time.Duration) {
				inflight++
				q.at(at+c.latency, func(at time.Duration) {
					run.served++
					run.lastServed = max(run.lastServed, at)
					if critical && n == 1 {
						run.criticalFirst++
					}
					release(at)
				})
			}
			shed := func(at time.Duration) {
				run.lastShed = max(run.lastShed, at)
				if n > 1 {
					run.reshed++
				}
				if n < 8 {
					q.at(at+retryAfter(at, critical, share), attempt(critical, share, n+1))
				}
			}
			switch {
			case critical && inflight < c.limit && len(waiting) == 0:
				served(at)
			case critical && len(waiting) < shedQueue:
				// Waits in the queue for a slot, or for shedMaxWait.
				me := &shedWaiter{serve: served}
				waiting = append(waiting, me)
				q.at(at+shedMaxWait, func(at time.Duration) {
					if !me.served {
						waiting = slices.DeleteFunc(waiting, func(w *shedWaiter) bool { return w == me })
						shed(at)
					}
				})
			case !critical && len(waiting) == 0 && (inflight == 0 || int64(inflight)*100 < int64(c.limit)*share):
				served(at)
			default:
				shed(at)
			}
		}
	}
	capacity := float64(c.limit) * float64(time.Second) / float64(c.latency)
	gap := time.Duration(float64(time.Second) / (float64(c.factor) * capacity))
	for i := 0; time.Duration(i)*gap < c.burst; i++ {
		run.requests++
		critical, share := false, int64(gradient.ShareDefault)
		switch i % 6 {
		case 0:
			critical = true
			run.critical++
		case 3, 4, 5:
			share = gradient.ShareSheddable
		}
		q.at(time.Duration(i)*gap, attempt(critical, share, 1))
	}
	q.run(time.Hour)
	return run
}

package main

import (
	"sync"
	"time"
)

// capacityServer is the rejecting server model: down (rejecting everything,
// or working at slow of its capacity) during the trigger, and otherwise
// serving at most capacity requests per second, counted per 100 ms bin;
// requests past that get 503, like a service shedding load.
//
// Shedding is not free: a rejected request costs rejectCost of a served
// one (accepting the connection, parsing, answering), so a bin that
// received more than it could serve leaves the next bin less room:
// served ≤ (capacity − rejectCost·arrivals) / (1 − rejectCost). That is
// what lets a retry storm keep a recovered server down (Bronson et al.,
// "Metastable Failures in Distributed Systems", HotOS 2021).
//
// Safe for concurrent use; time is passed in, so the live server and the
// simulator share it.
type capacityServer struct {
	down, up   time.Duration
	slow       float64
	perBin     float64
	rejectCost float64

	mu     sync.Mutex
	bin    int     // current bin
	room   float64 // requests the current bin may still serve
	served float64
	load   []int // arrivals per bin
}

func newCapacityServer(s scenario) *capacityServer {
	perBin := float64(s.capacity) * binWidth.Seconds()
	return &capacityServer{
		down: s.outageAt, up: s.recovery(), slow: s.slow,
		perBin: perBin, rejectCost: s.rejectCost,
		room: perBin,
	}
}

// admit decides a request arriving at t and reports whether it is served.
func (c *capacityServer) admit(t time.Duration) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	b := int(t / binWidth)
	c.load = grow(c.load, b)
	if b != c.bin {
		prev := 0
		if b == c.bin+1 {
			prev = c.load[c.bin]
		}
		c.bin, c.served, c.room = b, 0, c.perBin
		if p := float64(prev); p > c.perBin && c.rejectCost > 0 {
			c.room = max(0, (c.perBin-c.rejectCost*p)/(1-c.rejectCost))
		}
	}
	c.load[b]++
	room := c.room
	if t >= c.down && t < c.up {
		room *= c.slow
	}
	if c.served+1 <= room {
		c.served++
		return true
	}
	return false
}

func (c *capacityServer) loads() []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]int(nil), c.load...)
}

// queueServer is the queueing server model: every request waits its turn
// in one FIFO and is served at capacity per second (slow of it during the
// trigger, paused when slow is 0). It works through requests whose callers
// have given up as through any other, which is how a short slowdown turns
// into a metastable failure: the retries of timed-out requests join the
// queue, the queue outgrows the timeout, every request times out.
// Simulation only.
type queueServer struct {
	capacity  float64
	down, up  time.Duration
	slow      float64
	busyUntil time.Duration
	load      []int // arrivals per bin
}

// enqueue takes a request arriving at t and returns when it is served.
func (q *queueServer) enqueue(t time.Duration) time.Duration {
	q.load = grow(q.load, int(t/binWidth))
	q.load[int(t/binWidth)]++
	start := max(t, q.busyUntil)
	rate := q.capacity
	if start >= q.down && start < q.up {
		if q.slow == 0 {
			start = q.up // paused until the trigger ends
		} else {
			rate *= q.slow
		}
	}
	q.busyUntil = start + time.Duration(float64(time.Second)/rate)
	return q.busyUntil
}

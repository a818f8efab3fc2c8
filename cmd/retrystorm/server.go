package main

import (
	"sync"
	"time"
)

// capacityServer is the server model of the outage and overload scenarios:
// down (rejecting everything) during the outage, and otherwise serving at
// most capacity requests per second, counted per 100 ms bin; requests past
// that get 503, like a service shedding load.
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
		down: s.outageAt, up: s.recovery(),
		perBin: perBin, rejectCost: s.rejectCost,
		room: perBin,
	}
}

// admit decides a request arriving at t and reports whether it is served.
func (c *capacityServer) admit(t time.Duration) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	b := int(t / binWidth)
	for len(c.load) <= b {
		c.load = append(c.load, 0)
	}
	if b != c.bin {
		prev := 0
		if b == c.bin+1 {
			prev = c.load[c.bin]
		}
		c.bin, c.served, c.room = b, 0, c.perBin
		if p := float64(prev); p > c.perBin {
			c.room = max(0, (c.perBin-c.rejectCost*p)/(1-c.rejectCost))
		}
	}
	c.load[b]++
	if t >= c.down && t < c.up {
		return false
	}
	if c.served+1 <= c.room {
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

// casServer is the contention scenario's versioned row: a write succeeds
// only if no other write committed since the writer read the row.
type casServer struct {
	mu         sync.Mutex
	lastCommit time.Duration
	commits    int
	load       []int
}

// write reports whether a write that read the row at readAt commits at t.
func (c *casServer) write(readAt, t time.Duration) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	b := int(readAt / binWidth)
	for len(c.load) <= b {
		c.load = append(c.load, 0)
	}
	c.load[b]++
	if c.commits > 0 && c.lastCommit > readAt {
		return false
	}
	c.lastCommit = t
	c.commits++
	return true
}

func (c *casServer) loads() []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]int(nil), c.load...)
}

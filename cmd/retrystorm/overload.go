package main

import (
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/retryhttp/retryhttp/internal/defaults"
	"github.com/retryhttp/retryhttp/internal/throttle"
)

// sreThrottle is chapter 21's client-side throttling at sustained
// overload: one client offers 1,000 requests/s, evenly spaced, to a
// backend that accepts 100 in each second and rejects the rest, for ten
// minutes of virtual time, through the Throttle's rule (K 2, a two-minute
// window). It returns what the client sent per accepted request over the
// last five minutes; the book says requests settle near K times accepts.
// It also returns the same ratio for each 30 s of the run, for the chart.
func sreThrottle(seed uint64) (sentPerAccept float64, over30s []float64) {
	rng := rand.New(rand.NewPCG(seed, 21))
	h := throttle.New(defaults.ThrottleWindow, defaults.ThrottleMinRequests)
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	const rate, capacity = 1000, 100
	var sent, accepted float64
	var binSent, binAccepted float64
	inSecond := 0
	for i := range 10 * 60 * rate {
		now := start.Add(time.Duration(i) * time.Second / rate)
		if i%rate == 0 {
			inSecond = 0
		}
		if i > 0 && i%(30*rate) == 0 {
			over30s = append(over30s, binSent/binAccepted)
			binSent, binAccepted = 0, 0
		}
		if !h.Allow(defaults.ThrottleK, now, rng.Float64) {
			continue
		}
		ok := inSecond < capacity
		if ok {
			inSecond++
		}
		h.Count(ok, now)
		binSent++
		if ok {
			binAccepted++
		}
		if i >= 5*60*rate {
			sent++
			if ok {
				accepted++
			}
		}
	}
	return sent / accepted, over30s
}

// tailLatency is the latency model of the hedging row: most requests take
// 1 ms plus an exponential of mean 2 ms; 1% are stragglers, 10 ms times a
// Pareto of shape 1.77, whose tail reaches seconds. Each request draws its
// own, independently: Dean and Barroso's stragglers come from servers'
// queues, pauses and background work, which our model does not tie to a
// server or to time.
func tailLatency(rng *rand.Rand) time.Duration {
	if rng.Float64() < 0.01 {
		return time.Duration(float64(10*time.Millisecond) * math.Pow(1-rng.Float64(), -1/1.77))
	}
	return time.Millisecond + time.Duration(rng.ExpFloat64()*float64(2*time.Millisecond))
}

// tailAtScale is "The Tail at Scale"'s benchmark in virtual time: 10,000
// reads of 1,000 keys, spread over 100 servers, each read as slow as its
// slowest key. It returns the reads' 99.9th percentile without hedging and
// with a hedge after 10 ms (a copy of a request still unanswered then,
// whose answer is the earlier of the two, as Hedging does), and the share
// of requests the hedges add.
func tailAtScale(seed uint64) (without, with time.Duration, extra float64) {
	plain, hedged, extra := tailReads(seed)
	return quantile(plain, 0.999), quantile(hedged, 0.999), extra
}

// tailReads is tailAtScale's reads, sorted: each read's latency without
// hedging and with, and the share of requests the hedges add.
func tailReads(seed uint64) (plain, hedged []time.Duration, extra float64) {
	rng := rand.New(rand.NewPCG(seed, 2013))
	const reads, keys, delay = 10_000, 1_000, 10 * time.Millisecond
	plain, hedged = make([]time.Duration, reads), make([]time.Duration, reads)
	hedges := 0
	for r := range reads {
		var slowest, slowestHedged time.Duration
		for range keys { // key k on server k % 100: the model does not tell servers apart
			l := tailLatency(rng)
			slowest = max(slowest, l)
			if l > delay {
				hedges++
				l = min(l, delay+tailLatency(rng))
			}
			slowestHedged = max(slowestHedged, l)
		}
		plain[r], hedged[r] = slowest, slowestHedged
	}
	slices.Sort(plain)
	slices.Sort(hedged)
	return plain, hedged, float64(hedges) / (reads * keys)
}

// quantile is the q quantile of ds, which it sorts.
func quantile(ds []time.Duration, q float64) time.Duration {
	slices.Sort(ds)
	return ds[min(len(ds)-1, int(math.Ceil(q*float64(len(ds))))-1)]
}

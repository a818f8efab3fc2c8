package main

import (
	"time"

	"github.com/retryhttp/retryhttp"
	"github.com/retryhttp/retryhttp/internal/defaults"
)

// halvedScenario is a steady load that a capacity drop puts over
// capacity: 250 requests/s into a service that serves 300/s in order,
// whose capacity halves for 60 s (a lost instance, a noisy neighbour).
// Each attempt times out after 1 s; the clients run the Transport's
// defaults (4 attempts, a 200 ms base, full jitter, the default budget).
func halvedScenario() scenario {
	return scenario{
		name: "halved", rate: 250, duration: 100 * time.Second, runFor: 100 * time.Second,
		outageAt: 20 * time.Second, outage: 60 * time.Second, slow: 0.5,
		capacity: 300, queue: true, delay: time.Millisecond, attemptTimeout: time.Second, deadline: 10 * time.Second,
		attempts: defaults.MaxAttempts, base: defaults.BaseDelay, cap: defaults.MaxDelay,
		budget: defaultBudget,
	}
}

// defaultPolicy is the Transport's zero Policy, as the simulator reads it.
func defaultPolicy() retryhttp.Policy {
	return retryhttp.Policy{MaxAttempts: defaults.MaxAttempts, BaseDelay: defaults.BaseDelay, MaxDelay: defaults.MaxDelay,
		Jitter: retryhttp.JitterFull, MaxElapsed: defaults.MaxElapsed}
}

// halved returns, over the 50 s from 10 s into the drop, the requests
// answered per second and their p99 latency, without a client limit and
// with one.
func halved(seed uint64) (goodput, p99, serverP99 [2]float64, rs []result) {
	sc := halvedScenario()
	for i, st := range []strategy{
		{name: "defaults", policy: defaultPolicy(), budget: true},
		{name: "defaults, client limit", policy: defaultPolicy(), budget: true, limit: true},
	} {
		r := simulate(sc, st, seed)
		rs = append(rs, r)
		g, l := r.answeredBetween(30*time.Second, 80*time.Second, 0.99)
		_, sl := between(r.atServer, 30*time.Second, 80*time.Second, 0.99)
		goodput[i], p99[i], serverP99[i] = g, float64(l)/float64(time.Millisecond), float64(sl)/float64(time.Millisecond)
	}
	return goodput, p99, serverP99, rs
}

// awsPreset is the AWS SDKs' standard retry mode ("retries 2.1") as
// retryhttp settings, the block docs/client.md gives.
func awsPreset() strategy {
	return strategy{name: "AWS standard mode", budget: true, throttleCost: 5.0 / 14,
		policy: retryhttp.Policy{MaxAttempts: 3, BaseDelay: 50 * time.Millisecond, ThrottleDelay: time.Second,
			MaxDelay: 20 * time.Second, Jitter: retryhttp.JitterFull, MaxElapsed: defaults.MaxElapsed}}
}

// stormThrottled is the overload scenario (900/s into 1,000/s, a 2 s
// outage, rejections costing 30% of a served request) with the server's
// rejections as throttling answers (429), where the two kinds of retry
// are told apart.
func stormThrottled() scenario {
	sc := overloadScenario(1000, 2*time.Second)
	sc.throttling = true
	return sc
}

// awsAgainstDefaults returns the load (attempts per request) of the
// Transport's defaults and of the AWS values on stormThrottled, and the
// share of requests the AWS values served as a multiple of ours.
func awsAgainstDefaults(seed uint64) (ours, aws, served float64) {
	sc := stormThrottled()
	d := simulate(sc, strategy{name: "defaults", policy: defaultPolicy(), budget: true}, seed)
	a := simulate(sc, awsPreset(), seed)
	return d.amplification(), a.amplification(), a.successRate() / d.successRate()
}

// budgetBound is the most load a budget lets through on sc: each request
// once, plus ratio of a retry per request and floor per second, each
// retry costing cost of a token.
func budgetBound(sc scenario, cost float64) float64 {
	return 1 + (sc.budget.ratio+sc.budget.floor/sc.rate)/cost
}

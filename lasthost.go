package retryhttp

import (
	"net/url"
	"sync/atomic"

	"github.com/retryhttp/retryhttp/overload"
)

// lastHost is what the per-host brakes (the Breaker's circuits, the
// Throttle's counts, the Limiter's limits) gave a Transport for the last
// host it called: most clients call one host, and finding the entries
// again costs one load and two string comparisons for all the brakes,
// instead of parsing the URL's host and hashing it once per brake.
type lastHost struct {
	brakes              // whose entries these are
	scheme, host string // as in the URL

	circuit *hostCircuit    // nil: no Breaker
	counts  *hostThrottle   // nil: no Throttle
	limit   *overload.Limit // nil: no Limiter
	pace    *hostPace       // nil: no Pacer
}

// brakes are a Transport's per-host brakes, each nil when unset.
type brakes struct {
	breaker  *Breaker
	throttle *Throttle
	limiter  *overload.Limiter
	pacer    *Pacer
}

// hostBrakes returns u's host's entries in b's brakes, through cache.
func hostBrakes(cache *atomic.Pointer[lastHost], b brakes, u *url.URL) *lastHost {
	if c := cache.Load(); c != nil && c.brakes == b && c.host == u.Host && c.scheme == u.Scheme && c.fresh() {
		if c.circuit != nil && !c.circuit.used.Load() {
			c.circuit.used.Store(true)
		}
		return c
	}
	return lookUpHost(cache, b, u)
}

// lookUpHost is hostBrakes past its cache: u's host is looked up in each
// brake, and the result cached.
func lookUpHost(cache *atomic.Pointer[lastHost], b brakes, u *url.URL) *lastHost {
	c := &lastHost{brakes: b, scheme: u.Scheme, host: u.Host}
	if b.breaker != nil {
		c.circuit = b.breaker.circuitFor(hostOf(u))
	}
	if b.throttle != nil {
		c.counts = b.throttle.host(u)
	}
	if b.limiter != nil {
		c.limit = b.limiter.For(u.Scheme + "://" + u.Host)
	}
	if b.pacer != nil {
		c.pace = b.pacer.host(u)
	}
	cache.Store(c)
	return c
}

// fresh reports whether no brake has forgotten its entry since it was
// cached: a forgotten entry is no longer the one the brake's other
// callers share.
func (c *lastHost) fresh() bool {
	return (c.circuit == nil || !c.circuit.evicted.Load()) &&
		(c.counts == nil || !c.counts.evicted.Load()) &&
		(c.limit == nil || !c.limit.Forgotten())
}

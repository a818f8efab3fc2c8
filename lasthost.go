package retryhttp

import (
	"net/url"
	"sync/atomic"
)

// lastHost is a Transport's memory of what a per-host table (the
// Breaker's circuits, the Throttle's counts) gave it for the last host it
// called: most clients call one host, and finding the entry again costs
// two string comparisons instead of parsing the URL's host and hashing it.
type lastHost[O comparable, V any] struct {
	owner        O
	scheme, host string // as in the URL
	v            V
}

// cached returns the entry cache remembers for owner and u's host, if it
// is that host's.
func cached[O comparable, V any](cache *atomic.Pointer[lastHost[O, V]], owner O, u *url.URL) (V, bool) {
	if c := cache.Load(); c != nil && c.owner == owner && c.host == u.Host && c.scheme == u.Scheme {
		return c.v, true
	}
	var zero V
	return zero, false
}

// remember makes v the entry cache remembers for owner and u's host.
func remember[O comparable, V any](cache *atomic.Pointer[lastHost[O, V]], owner O, u *url.URL, v V) {
	cache.Store(&lastHost[O, V]{owner: owner, scheme: u.Scheme, host: u.Host, v: v})
}

package retryhttp

import (
	"net/http"
	"net/url"
	"sync/atomic"

	"github.com/retryhttp/retryhttp/overload"
)

// limitOf returns the concurrency limit of u's host in l, through the
// Transport's cache. The key is the URL's scheme and host, as the
// Breaker's and the Throttle's are.
func limitOf(l *overload.Limiter, u *url.URL, cache *atomic.Pointer[lastHost[*overload.Limiter, *overload.Limit]]) *overload.Limit {
	if lim, ok := cached(cache, l, u); ok {
		return lim
	}
	lim := l.For(u.Scheme + "://" + u.Host)
	remember(cache, l, u, lim)
	return lim
}

// withPriority returns a copy of h that carries p in the PriorityHeader,
// so that the server's Shedder knows what it may refuse first.
func withPriority(h http.Header, p overload.Priority) http.Header {
	c := h.Clone()
	if c == nil {
		c = make(http.Header, 1)
	}
	c[overload.PriorityHeader] = []string{p.String()}
	return c
}

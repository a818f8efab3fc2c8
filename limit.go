package retryhttp

import (
	"net/http"

	"github.com/retryhttp/retryhttp/overload"
)

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

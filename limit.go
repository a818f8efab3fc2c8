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

// priority gives the request one priority for the server and for the
// host's Limit: a valid PriorityHeader of the caller's is kept, and its
// priority put in the context the Limit counts a refusal under, when the
// context names none; otherwise the context's priority is sent as the
// header, in place of a misspelled one.
func (x *exchange) priority() {
	if vs := x.prep.header[overload.PriorityHeader]; len(vs) > 0 {
		if hp, ok := overload.ParsePriority(vs[0]); ok {
			if cur, had := overload.PriorityFrom(x.ctx); !had || cur != hp {
				x.ctx = overload.WithPriority(x.ctx, hp)
			}
			return
		}
	}
	if pr, ok := overload.PriorityFrom(x.ctx); ok {
		x.prep.header = withPriority(x.prep.header, pr) // the caller's header is left as it is
		x.prep.rewritten = true
	}
}

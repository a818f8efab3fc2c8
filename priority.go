package retryhttp

import (
	"context"
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

// requestPriority gives a request one priority, for the server and for
// the host's Limit: a valid PriorityHeader in h is kept, and its priority
// put in the context the Limit counts a refusal under; otherwise the
// context's priority is sent, in a copy of h, in place of a header that is
// absent or misspelled (rewritten reports that copy).
func requestPriority(ctx context.Context, h http.Header) (_ context.Context, _ http.Header, rewritten bool) {
	if vs := h[overload.PriorityHeader]; len(vs) > 0 {
		if hp, ok := overload.ParsePriority(vs[0]); ok {
			if cur, had := overload.PriorityFrom(ctx); !had || cur != hp {
				ctx = overload.WithPriority(ctx, hp)
			}
			return ctx, h, false
		}
	}
	if pr, ok := overload.PriorityFrom(ctx); ok {
		return ctx, withPriority(h, pr), true // the caller's header is left as it is
	}
	return ctx, h, false
}

package retryhttp

import (
	"context"
	"net/http"

	"github.com/retryhttp/retryhttp/overload"
)

// This file holds what a request's context tells a Transport: a Policy for
// one call and the attempt number, in one context value so a RoundTrip
// looks it up once, and the priority sent to the server.

// call is the context value a request may carry for the Transport: set by
// WithPolicy or WithoutRetries for one call, and by a Transport on its
// retries, for the layers below.
type call struct {
	policy  *Policy // nil: the Transport's own
	attempt int     // 0: no Transport above marked it
}

type callKey struct{}

func callFrom(ctx context.Context) call {
	c, _ := ctx.Value(callKey{}).(*call)
	if c == nil {
		return call{}
	}
	return *c
}

// WithPolicy returns a context whose requests a Transport sends with p
// instead of its own Policy: a different policy for one call without a
// second client. p is validated when the request is sent.
func WithPolicy(ctx context.Context, p Policy) context.Context {
	c := callFrom(ctx)
	c.policy = &p
	return context.WithValue(ctx, callKey{}, &c)
}

// WithoutRetries returns a context whose requests a Transport sends once.
func WithoutRetries(ctx context.Context) context.Context {
	p := Policy{MaxAttempts: 1}
	if c := callFrom(ctx); c.policy != nil {
		p = *c.policy
		p.MaxAttempts = 1
	}
	return WithPolicy(ctx, p)
}

// AttemptFromContext returns the number of the attempt a request is, 1 for
// the first, for the transports below a Transport (an SDK's, an
// OpenTelemetry one) to read. The first attempt carries no mark: it is the
// caller's own request, sent without a copy; so 1 also means "no Transport
// above".
func AttemptFromContext(ctx context.Context) int {
	if n := callFrom(ctx).attempt; n > 0 {
		return n
	}
	return 1
}

// withAttempt marks a retry's context with its attempt number.
func withAttempt(ctx context.Context, n int) context.Context {
	c := callFrom(ctx)
	c.attempt = n
	return context.WithValue(ctx, callKey{}, &c)
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

package overload

import (
	"context"
	"net/http"
	"strings"
)

// Priority says how important a request is when a server must refuse some.
// A [Shedder] refuses Sheddable requests first, then Default ones, and
// Critical ones only when the limit itself is reached.
type Priority uint8

const (
	// Default is the priority of a request that names none.
	Default Priority = iota
	// Critical requests are the ones the service exists for (a checkout, a
	// payment): refused last.
	Critical
	// Sheddable requests can wait or be lost (prefetches, batch jobs,
	// analytics): refused first.
	Sheddable
)

// PriorityHeader is the request header that carries a [Priority] from a
// client to a server: "critical", "default" or "sheddable".
const PriorityHeader = "Retryhttp-Priority"

// String returns the priority's header value.
func (p Priority) String() string {
	switch p {
	case Critical:
		return "critical"
	case Sheddable:
		return "sheddable"
	}
	return "default"
}

// ParsePriority reads a PriorityHeader value: "critical", "default" or
// "sheddable", in any case. ok is false for anything else (empty or
// misspelled), which a Shedder and a retryhttp.Transport ignore as if the
// header were absent: a misspelling neither makes a request critical nor
// hides the priority its context carries.
func ParsePriority(v string) (p Priority, ok bool) {
	switch {
	case strings.EqualFold(v, "critical"):
		return Critical, true
	case strings.EqualFold(v, "sheddable"):
		return Sheddable, true
	case strings.EqualFold(v, "default"):
		return Default, true
	}
	return Default, false
}

type priorityKey struct{}

// WithPriority returns a context whose requests carry priority p: a
// retryhttp.Transport sends it as the PriorityHeader header on every
// attempt (unless the request carries a valid one of its own), and
// counts its Limit's refusals under it; a Shedder reads it.
func WithPriority(ctx context.Context, p Priority) context.Context {
	return context.WithValue(ctx, priorityKey{}, p)
}

// PriorityFrom returns the priority WithPriority put in ctx, or a
// Shedder's handler context got from the request, and whether there was
// one.
func PriorityFrom(ctx context.Context) (Priority, bool) {
	p, ok := ctx.Value(priorityKey{}).(Priority)
	return p, ok
}

// requestPriority is the priority a server gives r: its header's, or,
// without a valid one, its context's (a middleware outside the Shedder may
// have set it), or Default.
func requestPriority(r *http.Request) Priority {
	if p, ok := ParsePriority(r.Header.Get(PriorityHeader)); ok {
		return p
	}
	if p, ok := PriorityFrom(r.Context()); ok {
		return p
	}
	return Default
}

package retryhttp

import "context"

// PacerStore holds the quotas of a [Pacer]'s hosts where the processes
// that share them read and tell them (see Pacer.Store), as
// redispacer.Store does in Redis. A quota's state is bytes the Pacer
// encodes; the store keeps each under its key and updates it atomically.
// A Pacer calls it up to three times a request to a host that sends
// rate-limit headers (to take a slot, to confirm it, and to tell the
// response), and never for one that does not. It must be safe for
// concurrent use.
type PacerStore interface {
	// Update calls f with the state stored under key (nil when there is
	// none) and stores what f returns, atomically: if the state under
	// key changed meanwhile, it calls f again, with the new state. f is
	// quick and has no other effect. Update bounds its own time; the
	// Pacer passes ctx of the request it paces, or one that is never
	// done.
	Update(ctx context.Context, key string, f func(state []byte) []byte) error
}

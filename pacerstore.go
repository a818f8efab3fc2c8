package retryhttp

import "context"

// PacerStore holds the quotas of a [Pacer]'s hosts where the processes
// that share them read and tell them (see Pacer.Store), as
// redispacer.Store does in Redis. A quota's state is bytes the Pacer
// encodes; the store keeps each under its key and updates it atomically.
// A Pacer calls it two or three times for each request it sends to a
// host that sends rate-limit headers (to take a slot, to confirm it if it
// waited, and to tell the response), once more each time a request held
// for a probe asks again (every pace.StorePoll, 50 ms), and never for a
// host that sends none. It must be safe for concurrent use.
type PacerStore interface {
	// Update calls f with the state stored under key (nil when there is
	// none) and stores what f returns, atomically: if the state under
	// key changed meanwhile, it calls f again, with the new state. f is
	// quick and has no other effect. Update bounds its own time; the
	// Pacer passes ctx of the request it paces, or one that is never
	// done.
	Update(ctx context.Context, key string, f func(state []byte) []byte) error
}

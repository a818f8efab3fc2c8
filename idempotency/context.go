package idempotency

import (
	"context"

	"github.com/retryhttp/retryhttp/internal/opkey"
)

// RequestKey is the Idempotency-Key of the request a handler serves, with
// the caller's scope.
type RequestKey struct {
	// Key is the key as the client sent it, parsed (`"q-1"` is q-1).
	Key string
	// Scope is the caller's identity (Options.Scope).
	Scope string
}

// StoreKey is the identity the middleware stores this key under.
func (k RequestKey) StoreKey() string { return StoreKey(k.Scope, k.Key) }

// KeyFromContext returns the key of the request a handler behind the
// middleware serves; ok is false outside it. A retryhttp.Transport with
// InjectIdempotencyKey reads the same context: the keys it sends on calls
// made while serving the request are derived from this one, so that every
// run of the handler (the client's retries) sends the same keys downstream.
func KeyFromContext(ctx context.Context) (RequestKey, bool) {
	op := opkey.From(ctx)
	if op == nil || op.Key == "" {
		return RequestKey{}, false
	}
	return RequestKey{Key: op.Key, Scope: op.Scope}, true
}

package retryhttp

import (
	"net/http"

	"github.com/google/uuid"

	"github.com/retryhttp/retryhttp/internal/wire"
)

// Idempotency key headers (draft-ietf-httpapi-idempotency-key-header). A
// request carrying either is safe to retry whatever its method: the server
// uses the key to recognise a replay and answer it from its record instead
// of acting twice. The X- form predates the draft; net/http honours both,
// and so do the Transport and package idempotency.
const (
	HeaderIdempotencyKey  = wire.IdempotencyKey
	HeaderXIdempotencyKey = wire.XIdempotencyKey
)

// withIdempotencyKey returns a copy of h carrying key as Idempotency-Key.
// The caller's header is never written to: the copy is made once per
// RoundTrip and shared by every attempt, so the server sees one key for one
// logical request.
func withIdempotencyKey(h http.Header, key string) http.Header {
	c := h.Clone()
	if c == nil {
		c = make(http.Header, 1)
	}
	c[HeaderIdempotencyKey] = []string{key}
	return c
}

// newIdempotencyKey is a fresh random key (UUIDv4).
func newIdempotencyKey() string { return uuid.NewString() }

// keyOf returns the request's key as sent.
func keyOf(h http.Header) string {
	k, _ := wire.Key(h)
	return k
}

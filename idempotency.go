package retryhttp

import (
	"net/http"

	"github.com/google/uuid"
)

// HeaderIdempotencyKey is the request header that makes a POST or PATCH safe
// to retry: the server uses it to recognise a replay and answer it from its
// record instead of acting twice (draft-ietf-httpapi-idempotency-key-header).
const HeaderIdempotencyKey = "Idempotency-Key"

// idempotentMethod reports whether RFC 9110 §9.2.2 lets the method be sent
// twice with the effect of once. The empty method is GET, as in net/http.
func idempotentMethod(method string) bool {
	switch method {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace,
		http.MethodPut, http.MethodDelete:
		return true
	}
	return false
}

// hasIdempotencyKey reads the header the way net/http's isReplayable does:
// the presence of Idempotency-Key or X-Idempotency-Key, even with a nil
// value (net/http's way of marking a request idempotent without sending the
// header), makes any method replayable.
func hasIdempotencyKey(h http.Header) bool {
	if _, ok := h["Idempotency-Key"]; ok {
		return true
	}
	_, ok := h["X-Idempotency-Key"]
	return ok
}

// injectable reports whether InjectIdempotencyKey applies to the method.
func injectable(method string) bool {
	return method == http.MethodPost || method == http.MethodPatch
}

// withIdempotencyKey returns a copy of h carrying a fresh random (UUIDv4)
// Idempotency-Key. The caller's header is never written to: the copy is made
// once per RoundTrip and shared by every attempt, so the server sees one key
// for one logical request.
func withIdempotencyKey(h http.Header) http.Header {
	c := h.Clone()
	if c == nil {
		c = make(http.Header, 1)
	}
	c[HeaderIdempotencyKey] = []string{uuid.NewString()}
	return c
}

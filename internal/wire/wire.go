// Package wire is the one place for the names and sets both halves of
// retryhttp agree on: the idempotency key headers, which methods are
// idempotent, and which take a key.
package wire

import "net/http"

// Idempotency key headers (draft-ietf-httpapi-idempotency-key-header). The
// X- form predates the draft; net/http treats both as making a request
// replayable, so the client and the server honour both.
const (
	IdempotencyKey  = "Idempotency-Key"
	XIdempotencyKey = "X-Idempotency-Key"
)

// Replayed is the response header the middleware sets, to "true", on a
// stored response it replays; the Transport counts the replays it
// receives.
const Replayed = "Idempotent-Replayed"

// KeyHeaders are the key headers, the standard one first.
var KeyHeaders = [...]string{IdempotencyKey, XIdempotencyKey}

// HasKey reports whether h carries either key header, read the way
// net/http's isReplayable does: presence, even with a nil value (net/http's
// way of marking a request idempotent without sending the header).
func HasKey(h http.Header) bool {
	if len(h) == 0 {
		return false
	}
	for _, k := range KeyHeaders {
		if _, ok := h[k]; ok {
			return true
		}
	}
	return false
}

// Key returns the first value of the first key header present, and the
// header's name; "" when there is none.
func Key(h http.Header) (value, header string) {
	for _, k := range KeyHeaders {
		if v := h[k]; len(v) > 0 {
			return v[0], k
		}
	}
	return "", ""
}

// Idempotent reports whether RFC 9110 §9.2.2 lets the method be sent twice
// with the effect of once. The empty method is GET, as in net/http.
func Idempotent(method string) bool {
	switch method {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace,
		http.MethodPut, http.MethodDelete:
		return true
	}
	return false
}

// KeyedMethods are the methods that need an Idempotency-Key to be safe to
// retry: the ones the client injects a key into and the server's
// middleware applies to by default.
var KeyedMethods = [...]string{http.MethodPost, http.MethodPatch}

// Keyed reports whether method is one of KeyedMethods.
func Keyed(method string) bool {
	for _, m := range KeyedMethods {
		if m == method {
			return true
		}
	}
	return false
}

package retryhttp

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strconv"

	"github.com/retryhttp/retryhttp/internal/opkey"
)

// Keys derived from the operation a request belongs to (an inbound request
// behind package idempotency, a job, a message), so that every run of a
// handler sends the same keys downstream.

// WithOperationKey returns a context for a logical operation that is not
// an inbound HTTP request with a key: a job, a queue message, a scheduled
// run. A Transport with InjectIdempotencyKey derives the keys of the calls
// made with it from id, so that running the operation again (a redelivered
// message) sends the same keys. id must identify the operation uniquely,
// and the same way on every run (a job ID, a message ID).
func WithOperationKey(ctx context.Context, id string) context.Context {
	return opkey.With(ctx, &opkey.Op{ID: id})
}

// WithCallLabel names the calls made with ctx within their operation
// ("charge", "send-receipt"), for the derived key. A labelled call's key
// depends on the operation, the label and the call's rank among the calls
// with that label in this run (the first "charge", the second), and not on
// its method, host or path: replicas that reach the provider under other
// names (localhost, an address, a regional alias), or a URL that changes
// between runs, derive the same key, and two calls under one label get
// two keys. Without a label a call is named by its method, host and path
// and its rank among the calls to that target in this run (the first POST
// to /v1/charges, the second, ...), which is stable only if the operation
// makes its calls in the same order, to the same URLs, every time: label
// the calls that move money.
func WithCallLabel(ctx context.Context, label string) context.Context {
	return context.WithValue(ctx, labelKey{}, label)
}

type labelKey struct{}

// derivedKey is the Idempotency-Key of a call made within an operation: a
// hash of the operation's identity and the call's, so it is the same on
// every run of the operation, different for every call in it, a valid key
// (64 hex digits), and reveals nothing of the operation's own key.
//
// The parts hashed are a version string, the operation's ID, and the
// call's name: its target (method, host, path) and rank among calls to it,
// or, for a labelled call, the label and its rank among calls with it.
// Each part is followed by a zero byte. Keys must agree across versions of
// the library in one rolling deploy: TestDerivedKeys pins both forms.
func derivedKey(ctx context.Context, op *opkey.Op, req *http.Request) string {
	var parts [4]string
	if label, _ := ctx.Value(labelKey{}).(string); label != "" {
		parts = [...]string{"retryhttp derived key v2 label", op.ID, label, strconv.Itoa(op.Next("label\x00" + label))}
	} else {
		target := req.Method + " " + req.URL.Host + req.URL.Path
		parts = [...]string{"retryhttp derived key v1", op.ID, target, "#" + strconv.Itoa(op.Next(target))}
	}
	var buf [256]byte // most identities fit; a longer one grows on the heap
	b := buf[:0]
	for _, part := range parts {
		b = append(append(b, part...), 0)
	}
	sum := sha256.Sum256(b)
	var out [2 * sha256.Size]byte
	hex.Encode(out[:], sum[:])
	return string(out[:])
}

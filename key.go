package retryhttp

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/retryhttp/retryhttp/internal/opkey"
	"github.com/retryhttp/retryhttp/internal/wire"
)

// This file holds the Idempotency-Key a call sends (the caller's, one
// derived from the operation, or a fresh one) and the retries of a layer
// above that the key and the SDKs' own headers reveal.

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

// Retries stacked on retries: a Transport under another one, or under an
// SDK that retries on its own, sends the upper layer's repeats once, so S
// upper attempts over R Transport attempts make at most R + S − 1 sends
// instead of R × S.

// stackedSignals are the signals of an upper layer's retry: the signal
// label of retryhttp_stacked_retries_total, and the warning a Transport
// logs the first time it meets each, which names the fix only where the
// signal names the layer.
var stackedSignals = [...]struct{ name, warning string }{
	stackedRetryhttp: {"retryhttp", "retryhttp: two Transports on one path: the one nearest the network retries under its own Policy, " +
		"the one above does not retry what it gave up on; remove one of them"},
	stackedKey: {"idempotency_key", "retryhttp: the same Idempotency-Key was sent again within MaxElapsed: a layer above this Transport " +
		"(an SDK, a job queue, the application) retried the request, so the Transport sends it once; " +
		"if that layer is an SDK or a queue, turn its retries off, or send with retryhttp.WithoutRetries"},
	stackedOperation: {"operation", ""}, // not a warning: see stacked
	stackedAWS: {"amz_sdk_request", "retryhttp: aws-sdk-go-v2 retries over this Transport (amz-sdk-request: attempt > 1), so the Transport " +
		"sends its retries once; turn them off: config.WithRetryer(func() aws.Retryer { return aws.NopRetryer{} })"},
	stackedStainless: {"stainless", "retryhttp: an OpenAI or Anthropic SDK retries over this Transport (X-Stainless-Retry-Count > 0), so the " +
		"Transport sends its retries once; turn them off: option.WithMaxRetries(0)"},
	stackedGoogle: {"google", "retryhttp: a Google Cloud client retries over this Transport (gccl-attempt-count > 1), so the Transport " +
		"sends its retries once; turn its retries off (storage: Retryer(storage.WithPolicy(storage.RetryNever)))"},
}

// stackedSignal indexes stackedSignals.
type stackedSignal uint8

const (
	stackedNone      stackedSignal = iota
	stackedRetryhttp               // a Transport above is retrying this request, or one below gave up on it
	stackedKey                     // the caller's Idempotency-Key again within the retry window
	stackedOperation               // a derived key again: the operation was retried (its handler ran again)
	stackedAWS                     // aws-sdk-go-v2: amz-sdk-request: attempt=N, N > 1
	stackedStainless               // OpenAI, Anthropic SDKs: X-Stainless-Retry-Count > 0
	stackedGoogle                  // Google Cloud clients: x-goog-api-client gccl-attempt-count/N, N > 1
)

func (s stackedSignal) String() string { return stackedSignals[s].name }

// stackedSignalNamed is the stackedSignal whose label is name.
func stackedSignalNamed(name string) (stackedSignal, bool) {
	for i, s := range stackedSignals {
		if s.name == name {
			return stackedSignal(i), true
		}
	}
	return stackedNone, false
}

// recentKeys remembers the keys a Transport sent within the retry window,
// to recognise an upper layer sending one again. It holds at most
// recentKeysMax keys; past that the oldest is forgotten.
type recentKeys struct {
	mu   sync.Mutex
	at   map[string]time.Duration // key -> when it was last sent (mono); guarded by mu
	ring []string                 // keys in the order they were added; guarded by mu
	next int                      // the ring slot to reuse; guarded by mu
}

const recentKeysMax = 4096

// repeat records key as sent at now (a mono reading) and reports whether
// it was sent within window before.
func (r *recentKeys) repeat(key string, now, window time.Duration) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.at == nil {
		r.at = make(map[string]time.Duration)
	}
	last, ok := r.at[key]
	if !ok {
		if len(r.ring) < recentKeysMax {
			r.ring = append(r.ring, key)
		} else {
			delete(r.at, r.ring[r.next])
			r.ring[r.next] = key
			r.next = (r.next + 1) % recentKeysMax
		}
	}
	r.at[key] = now
	return ok && now-last <= window
}

// spentBody marks a response a Transport gave up on after deciding it was
// worth retrying: a Transport above it must not retry it again.
type spentBody struct{ io.ReadCloser }

// spent reports whether resp or err comes from a Transport below that
// retries and gave up on it.
func spent(resp *http.Response, err error) bool {
	if resp != nil {
		_, ok := resp.Body.(*spentBody)
		return ok
	}
	var re *RetryError
	return errors.As(err, &re) && re.retried
}

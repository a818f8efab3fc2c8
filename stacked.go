package retryhttp

import (
	"errors"
	"io"
	"net/http"
	"sync"
	"time"
)

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

package retryhttptest

import (
	"net/http"
	"testing"
	"time"

	"github.com/retryhttp/retryhttp"
)

// The Assert functions report a failure on tb and return false when the
// property does not hold, so a test can stop early with
// `if !AssertAttempts(...) { return }`.

// AssertAttempts checks that reqs holds exactly n requests.
func AssertAttempts(tb testing.TB, reqs []Request, n int) bool {
	tb.Helper()
	if len(reqs) != n {
		tb.Errorf("server saw %d attempts, want %d: %s", len(reqs), n, describe(reqs))
		return false
	}
	return true
}

// AssertSameIdempotencyKey checks that every request carries the same,
// non-empty Idempotency-Key: one logical request, one key.
func AssertSameIdempotencyKey(tb testing.TB, reqs []Request) bool {
	tb.Helper()
	if len(reqs) == 0 {
		tb.Errorf("no requests to compare keys of")
		return false
	}
	key := reqs[0].IdempotencyKey()
	if key == "" {
		tb.Errorf("attempt 1 carried no Idempotency-Key")
		return false
	}
	for i, r := range reqs[1:] {
		if got := r.IdempotencyKey(); got != key {
			tb.Errorf("attempt %d carried Idempotency-Key %q, attempt 1 carried %q", i+2, got, key)
			return false
		}
	}
	return true
}

// Range bounds one wait between attempts, both ends included.
type Range struct{ Min, Max time.Duration }

// AssertWaits checks the gap before each retry: gap i (between attempt i+1
// and i+2) must lie within ranges[i]; the last range applies to the rest.
// Gaps are measured where the server read the request headers, so allow for
// loopback latency in Max.
func AssertWaits(tb testing.TB, reqs []Request, ranges ...Range) bool {
	tb.Helper()
	if len(ranges) == 0 {
		tb.Errorf("AssertWaits needs at least one Range")
		return false
	}
	ok := true
	for i := 1; i < len(reqs); i++ {
		gap := reqs[i].At.Sub(reqs[i-1].At)
		r := ranges[min(i-1, len(ranges)-1)]
		if gap < r.Min || gap > r.Max {
			tb.Errorf("wait before attempt %d was %v, want within [%v, %v]", i+1, gap, r.Min, r.Max)
			ok = false
		}
	}
	return ok
}

// AssertRetryAfterRespected checks that no request came sooner than the
// Retry-After the server gave the request before it.
func AssertRetryAfterRespected(tb testing.TB, reqs []Request) bool {
	tb.Helper()
	ok := true
	for i := 1; i < len(reqs); i++ {
		prev := reqs[i-1]
		want, known := retryAfterDuration(prev.RetryAfter, prev.At)
		if !known {
			continue
		}
		if gap := reqs[i].At.Sub(prev.At); gap < want {
			tb.Errorf("attempt %d came %v after a Retry-After of %q (%v)", i+1, gap, prev.RetryAfter, want)
			ok = false
		}
	}
	return ok
}

// AssertExactlyOnce checks that every Idempotency-Key with an effect has
// exactly one, and that there were want keys in all.
func (e *Effects) AssertExactlyOnce(tb testing.TB, want int) bool {
	tb.Helper()
	keys := e.Keys()
	ok := true
	if len(keys) != want {
		tb.Errorf("side effects under %d keys, want %d", len(keys), want)
		ok = false
	}
	for _, k := range keys {
		if n := e.Count(k); n != 1 {
			tb.Errorf("key %q: %d side effects, want exactly 1", k, n)
			ok = false
		}
	}
	return ok
}

// retryAfterDuration reads a Retry-After as the Transport does.
func retryAfterDuration(v string, at time.Time) (time.Duration, bool) {
	d, ok := retryhttp.ServerWait(&http.Response{Header: http.Header{"Retry-After": {v}}}, at, []retryhttp.RetryHint{})
	if ok && !isDigits(v) {
		// HTTP-dates have whole seconds: the wait can end up to 1s before
		// at+value when at is mid-second.
		d -= time.Second
	}
	return d, ok
}

func isDigits(v string) bool {
	for _, c := range v {
		if c < '0' || c > '9' {
			return false
		}
	}
	return v != ""
}

func describe(reqs []Request) string {
	s := "["
	for i, r := range reqs {
		if i > 0 {
			s += ", "
		}
		s += r.Method + " " + r.Path + " -> " + r.Did
	}
	return s + "]"
}

package retryhttp

import (
	"math"
	"net/http"
	"time"
)

// ServerWait returns how long resp asks its client to wait before sending
// again: its Retry-After (RFC 9110 §10.2.3), or, when it has no usable
// one, what the first of hints that answers reads (nil means
// DefaultRetryHints(); an empty slice reads none). ok is false when the
// response asks for nothing. It is the one reading of a server's wait in
// this library: the Transport waits what it says (within
// Policy.MaxRetryAfter), and the outbox relay and retryhttptest call it.
func ServerWait(resp *http.Response, now time.Time, hints []RetryHint) (time.Duration, bool) {
	if d, ok := parseRetryAfter(field(resp.Header, "Retry-After"), now); ok {
		return d, true
	}
	if hints == nil {
		hints = defaultRetryHints
	}
	for _, h := range hints {
		if d, ok := h(resp, now); ok {
			return d, true
		}
	}
	return 0, false
}

// parseRetryAfter reads a Retry-After header value (RFC 9110 §10.2.3):
// either delta-seconds or an HTTP-date in any of the three forms
// http.ParseTime accepts. ok is false for a missing, malformed or negative
// value and for a date that is not after now, so the caller falls back to
// its own backoff. A delta too large to represent saturates, so it is still
// recognised as "longer than we will wait".
func parseRetryAfter(v string, now time.Time) (d time.Duration, ok bool) {
	v = trimOWS(v)
	if v == "" {
		return 0, false
	}
	if isDigits(v) {
		const maxSeconds = math.MaxInt64 / int64(time.Second)
		var secs int64
		for i := 0; i < len(v); i++ {
			secs = secs*10 + int64(v[i]-'0')
			if secs > maxSeconds {
				return time.Duration(math.MaxInt64), true
			}
		}
		return time.Duration(secs) * time.Second, true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	d = t.Sub(now)
	if d <= 0 {
		return 0, false
	}
	return d, true
}

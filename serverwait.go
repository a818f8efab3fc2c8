package retryhttp

import (
	"iter"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// This file holds how long a server asks its client to wait: Retry-After,
// the rate-limit dialects real APIs speak instead, and the small readers of
// header field values that they, the retry decision and the stacked-retry
// signals share.

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

// RetryHint reads, from a retryable response without a usable Retry-After,
// how long the server wants the client to wait: the rate-limit dialects
// real APIs speak instead of Retry-After. ok is false when the response
// says nothing the hint understands. The wait replaces the backoff and,
// like Retry-After, is capped by Policy.MaxRetryAfter: a longer one is the
// server's answer, returned at once.
type RetryHint func(resp *http.Response, now time.Time) (wait time.Duration, ok bool)

// DefaultRetryHints returns the hints a Transport reads when RetryHints is
// nil, first match wins, as a new slice to extend or reorder:
//
//   - Retry-After-Ms (milliseconds; OpenAI, Anthropic).
//   - x-amz-retry-after (milliseconds; AWS services).
//   - the IETF RateLimit field (draft-ietf-httpapi-
//     ratelimit-headers: `"default";r=0;t=30`, as Cloudflare sends) and the
//     older drafts' RateLimit-Reset, seconds or a Unix time (GitLab) told
//     apart by size, as ResetUnitAuto does.
//   - x-ratelimit-reset-requests and -tokens ("6m0s", "1s",
//     "20ms").
//   - RateLimitReset("X-RateLimit-Reset", ResetUnitAuto): seconds or a Unix
//     time (GitHub), told apart by size.
func DefaultRetryHints() []RetryHint {
	return []RetryHint{retryAfterMs, amzRetryAfter, rateLimitFields, openAIResets, RateLimitReset("X-RateLimit-Reset", ResetUnitAuto)}
}

// retryAfterMs reads Retry-After-Ms: a wait in milliseconds, fractional
// allowed.
func retryAfterMs(resp *http.Response, _ time.Time) (time.Duration, bool) {
	return millis(field(resp.Header, "Retry-After-Ms"))
}

// amzRetryAfter reads x-amz-retry-after, AWS's own pushback: a wait in
// milliseconds. Capped by Policy.MaxRetryAfter like every hint.
func amzRetryAfter(resp *http.Response, _ time.Time) (time.Duration, bool) {
	return millis(field(resp.Header, "X-Amz-Retry-After"))
}

// millis reads a field value that is a wait in milliseconds, fractional
// allowed.
func millis(v string) (time.Duration, bool) {
	v = trimOWS(v)
	if v == "" {
		return 0, false
	}
	ms, err := strconv.ParseFloat(v, 64)
	if err != nil || ms < 0 || ms != ms {
		return 0, false
	}
	return seconds(ms / 1000), true
}

// ResetUnit says how a reset header's number is to be read.
type ResetUnit int

const (
	// ResetUnitAuto reads a number of at least 1,000,000,000, or at least
	// the current Unix time less a day, as a Unix time and a smaller one as
	// seconds to wait: a delay of decades is no delay an API means, and a
	// Unix time a day or more in the past is no reset, so the rule cannot
	// mistake one for the other in a way that makes the client wait
	// decades (the second bound serves a clock set before 2001, as in a
	// test's virtual time).
	ResetUnitAuto ResetUnit = iota
	// ResetUnitSeconds: seconds to wait (fractions allowed).
	ResetUnitSeconds
	// ResetUnitUnix: a Unix time in seconds, when the limit resets.
	ResetUnitUnix
)

// RateLimitReset returns a hint that reads header as a reset time in unit,
// for APIs whose dialect you know (GitHub's X-RateLimit-Reset is ResetUnitUnix).
// It applies to a 429, or to any retryable response whose
// X-RateLimit-Remaining is 0: a reset says when the quota is back, which
// says nothing about a 503 with quota left.
func RateLimitReset(header string, unit ResetUnit) RetryHint {
	header = http.CanonicalHeaderKey(header)
	return func(resp *http.Response, now time.Time) (time.Duration, bool) {
		v := trimOWS(field(resp.Header, header))
		if v == "" || !exhausted(resp, "X-Ratelimit-Remaining") {
			return 0, false
		}
		return parseReset(v, unit, now)
	}
}

// parseReset reads a reset value in unit.
func parseReset(v string, unit ResetUnit, now time.Time) (time.Duration, bool) {
	n, err := strconv.ParseFloat(v, 64)
	if err != nil || n < 0 || n != n {
		return 0, false
	}
	if unit == ResetUnitUnix || unit == ResetUnitAuto && (n >= 1e9 || n >= float64(now.Unix()-86400)) {
		at := time.Unix(0, 0).Add(seconds(n))
		if !at.After(now) {
			return 0, true // the reset has passed: go now
		}
		return at.Sub(now), true
	}
	return seconds(n), true
}

// exhausted reports whether a response is a rate-limit refusal: a 429, or
// a remaining count of 0 in header.
func exhausted(resp *http.Response, header string) bool {
	return resp.StatusCode == http.StatusTooManyRequests || trimOWS(field(resp.Header, header)) == "0"
}

// rateLimitFields reads the IETF RateLimit header fields. The current
// drafts send `RateLimit: "policy";r=<remaining>;t=<seconds to reset>`, a
// list with one item per quota policy: the wait is the longest t among the
// items whose r is 0 (on a 429 with none at 0, the shortest t). The older
// drafts sent RateLimit-Reset: <seconds>, read when RateLimit-Remaining is 0
// or the status is 429; GitLab sends a Unix time there, read as one by
// ResetUnitAuto's rule.
func rateLimitFields(resp *http.Response, now time.Time) (time.Duration, bool) {
	if v := field(resp.Header, "Ratelimit"); v != "" {
		if d, ok := parseRateLimitField(v, resp.StatusCode == http.StatusTooManyRequests); ok {
			return d, true
		}
	}
	if v := trimOWS(field(resp.Header, "Ratelimit-Reset")); v != "" && exhausted(resp, "Ratelimit-Remaining") {
		return parseReset(v, ResetUnitAuto, now)
	}
	return 0, false
}

// rateLimitItem is one item of a RateLimit field: its r (requests left)
// and t (seconds to the reset) parameters, -1 where absent or out of
// range; bad where a parameter's value was out of range.
type rateLimitItem struct {
	r, t float64
	bad  bool
}

// rateLimitItems reads a RateLimit field value, a Structured Fields list
// of items with r and t parameters, an item at a time.
func rateLimitItems(v string) iter.Seq[rateLimitItem] {
	return func(yield func(rateLimitItem) bool) {
		for item := range strings.SplitSeq(v, ",") {
			it := rateLimitItem{r: -1, t: -1}
			_, params, _ := strings.Cut(item, ";")
			for p := range strings.SplitSeq(params, ";") {
				k, val, ok := strings.Cut(trimOWS(p), "=")
				if !ok {
					continue
				}
				n, err := strconv.ParseFloat(trimOWS(val), 64)
				if err != nil || n < 0 || n != n {
					it.bad = true
					continue
				}
				switch k {
				case "r":
					it.r = n
				case "t":
					it.t = n
				}
			}
			if !yield(it) {
				return
			}
		}
	}
}

// parseRateLimitField reads a RateLimit field value for the wait it
// asks for.
func parseRateLimitField(v string, is429 bool) (time.Duration, bool) {
	var w quotaWait
	for it := range rateLimitItems(v) {
		if it.t >= 0 {
			w.add(seconds(it.t), it.r == 0)
		}
	}
	return w.wait(is429)
}

// quotaWait picks the wait among several quotas' resets: the longest
// among the quotas with none left; when no quota is spent, the shortest,
// and only on a 429 (the server refused, and the first reset may let the
// request through).
// The zero quotaWait has seen no quota.
type quotaWait struct {
	longestExhausted, shortest time.Duration
	exhausted, any             bool // a quota with none left; any quota
}

func (w *quotaWait) add(reset time.Duration, exhausted bool) {
	if exhausted && (!w.exhausted || reset > w.longestExhausted) {
		w.longestExhausted, w.exhausted = reset, true
	}
	if !w.any || reset < w.shortest {
		w.shortest, w.any = reset, true
	}
}

func (w *quotaWait) wait(is429 bool) (time.Duration, bool) {
	switch {
	case w.exhausted:
		return w.longestExhausted, true
	case is429 && w.any:
		return w.shortest, true
	}
	return 0, false
}

// openAIResets reads OpenAI's x-ratelimit-reset-requests and
// x-ratelimit-reset-tokens (durations: "6m0s", "1s", "20ms"). The wait is
// the longest reset among the quotas whose x-ratelimit-remaining-* is 0;
// when neither says 0, the shortest reset, on a 429 only.
func openAIResets(resp *http.Response, _ time.Time) (time.Duration, bool) {
	var w quotaWait
	for _, q := range openAIQuotas {
		v := trimOWS(field(resp.Header, q.reset))
		if v == "" {
			continue
		}
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			continue
		}
		w.add(d, trimOWS(field(resp.Header, q.remaining)) == "0")
	}
	return w.wait(resp.StatusCode == http.StatusTooManyRequests)
}

// openAIQuotas are the headers of OpenAI's two quotas, requests and
// tokens: the count left, and the reset as a Go duration ("6m0s").
var openAIQuotas = [...]struct{ remaining, reset string }{
	{"X-Ratelimit-Remaining-Requests", "X-Ratelimit-Reset-Requests"},
	{"X-Ratelimit-Remaining-Tokens", "X-Ratelimit-Reset-Tokens"},
}

// seconds converts a count of seconds to a Duration, saturating, so a huge
// value still reads as "longer than we will wait".
func seconds(s float64) time.Duration {
	const maxSeconds = float64(1<<63-1) / float64(time.Second)
	if s >= maxSeconds {
		return 1<<63 - 1
	}
	return time.Duration(s * float64(time.Second))
}

var defaultRetryHints = DefaultRetryHints()

// field returns the first value of the header field named, in canonical
// form, by name: a map lookup. Header.Get canonicalises its argument on
// every call, which the hints would pay for on every retry, for names that
// are constants.
func field(h http.Header, name string) string {
	if v := h[name]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// fieldInt reads the integer after prefix in v.
func fieldInt(v, prefix string) (int, bool) {
	i := strings.Index(v, prefix)
	if i < 0 {
		return 0, false
	}
	v = v[i+len(prefix):]
	end := 0
	for end < len(v) && v[end] >= '0' && v[end] <= '9' {
		end++
	}
	n, err := strconv.Atoi(v[:end])
	return n, err == nil
}

// trimOWS strips the optional white space (SP, HTAB) HTTP allows around a
// field value.
func trimOWS(s string) string {
	for len(s) > 0 && (s[0] == ' ' || s[0] == '\t') {
		s = s[1:]
	}
	for len(s) > 0 && (s[len(s)-1] == ' ' || s[len(s)-1] == '\t') {
		s = s[:len(s)-1]
	}
	return s
}

// isDigits reports whether s is a run of ASCII digits (empty counts).
func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

package retryhttp

import (
	"iter"
	"net/http"
	"strconv"
	"strings"
	"time"
)

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
	var longestExhausted, shortest time.Duration = -1, -1
	for it := range rateLimitItems(v) {
		r, t := it.r, it.t
		if t < 0 {
			continue
		}
		d := seconds(t)
		if r == 0 {
			longestExhausted = max(longestExhausted, d)
		}
		if shortest < 0 || d < shortest {
			shortest = d
		}
	}
	switch {
	case longestExhausted >= 0:
		return longestExhausted, true
	case is429 && shortest >= 0:
		return shortest, true
	}
	return 0, false
}

// openAIResets reads OpenAI's x-ratelimit-reset-requests and
// x-ratelimit-reset-tokens (durations: "6m0s", "1s", "20ms"). The wait is
// the longest reset among the quotas whose x-ratelimit-remaining-* is 0;
// when neither says 0, the shortest reset, on a 429 only.
func openAIResets(resp *http.Response, _ time.Time) (time.Duration, bool) {
	var longestExhausted, shortest time.Duration = -1, -1
	for _, q := range [...]struct{ reset, remaining string }{
		{"X-Ratelimit-Reset-Requests", "X-Ratelimit-Remaining-Requests"},
		{"X-Ratelimit-Reset-Tokens", "X-Ratelimit-Remaining-Tokens"},
	} {
		v := trimOWS(field(resp.Header, q.reset))
		if v == "" {
			continue
		}
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			continue
		}
		if trimOWS(field(resp.Header, q.remaining)) == "0" {
			longestExhausted = max(longestExhausted, d)
		}
		if shortest < 0 || d < shortest {
			shortest = d
		}
	}
	switch {
	case longestExhausted >= 0:
		return longestExhausted, true
	case resp.StatusCode == http.StatusTooManyRequests && shortest >= 0:
		return shortest, true
	}
	return 0, false
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

package retryhttp

import (
	"bytes"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(1999, 12, 31, 23, 59, 0, 0, time.UTC)
	cases := []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"0", 0, true},
		{"3", 3 * time.Second, true},
		{" 120\t", 120 * time.Second, true},
		{"007", 7 * time.Second, true},
		{"99999999999999999999", math.MaxInt64, true},
		{"9223372037", math.MaxInt64, true},
		{"9223372036", 9223372036 * time.Second, true},
		{"Fri, 31 Dec 1999 23:59:59 GMT", 59 * time.Second, true},  // IMF-fixdate
		{"Friday, 31-Dec-99 23:59:59 GMT", 59 * time.Second, true}, // RFC 850
		{"Fri Dec 31 23:59:59 1999", 59 * time.Second, true},       // asctime
		{"Fri, 31 Dec 1999 23:59:00 GMT", 0, false},                // now: not after
		{"Fri, 31 Dec 1999 23:00:00 GMT", 0, false},                // past
		{"", 0, false},
		{"   ", 0, false},
		{"-1", 0, false},
		{"+1", 0, false},
		{"1.5", 0, false},
		{"1e3", 0, false},
		{"soon", 0, false},
		{"12 34", 0, false},
	}
	for _, tc := range cases {
		got, ok := parseRetryAfter(tc.in, now)
		assert.Equal(t, tc.ok, ok, "%q", tc.in)
		assert.Equal(t, tc.want, got, "%q", tc.in)
	}
}

// FuzzParseRetryAfter: any header value either falls back (ok=false, 0) or
// yields a non-negative wait; digits-only values are exact or saturate.
func FuzzParseRetryAfter(f *testing.F) {
	f.Add("5")
	f.Add("Sun, 06 Nov 1994 08:49:37 GMT")
	now := time.Date(1994, 11, 6, 8, 49, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, v string) {
		d, ok := parseRetryAfter(v, now)
		if !ok {
			if d != 0 {
				t.Fatalf("%q: not ok but %v", v, d)
			}
			return
		}
		if d < 0 {
			t.Fatalf("%q: negative wait %v", v, d)
		}
		if s := trimOWS(v); isDigits(s) && len(s) < 10 {
			var want int64
			for _, c := range s {
				want = want*10 + int64(c-'0')
			}
			if d != time.Duration(want)*time.Second {
				t.Fatalf("%q: got %v want %ds", v, d, want)
			}
		}
	})
}

var hintNow = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

func hdr(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return h
}

// Each dialect, read by the default hints.
func TestRetryHints(t *testing.T) {
	ms := time.Millisecond
	for _, tc := range []struct {
		name   string
		status int
		h      http.Header
		want   time.Duration
		ok     bool
	}{
		{"Retry-After-Ms", 503, hdr("Retry-After-Ms", "1500"), 1500 * ms, true},
		{"Retry-After-Ms fractional", 429, hdr("Retry-After-Ms", "12.5"), 12500 * time.Microsecond, true},
		{"Retry-After-Ms garbage", 429, hdr("Retry-After-Ms", "soon"), 0, false},
		{"Retry-After-Ms negative", 429, hdr("Retry-After-Ms", "-5"), 0, false},
		{"x-amz-retry-after", 503, hdr("X-Amz-Retry-After", "2500"), 2500 * ms, true},
		{"x-amz-retry-after garbage", 503, hdr("X-Amz-Retry-After", "later"), 0, false},
		{"IETF RateLimit, one policy exhausted", 429, hdr("Ratelimit", `"default";r=0;t=30`), 30 * time.Second, true},
		{"IETF RateLimit, the exhausted of two", 429, hdr("Ratelimit", `"burst";r=5;t=1, "day";r=0;t=3600`), time.Hour, true},
		{"IETF RateLimit, none exhausted, on a 429: the soonest", 429, hdr("Ratelimit", `"a";r=3;t=20, "b";r=1;t=7`), 7 * time.Second, true},
		{"IETF RateLimit, none exhausted, on a 503: nothing", 503, hdr("Ratelimit", `"a";r=3;t=20`), 0, false},
		{"IETF RateLimit, fractional t", 429, hdr("Ratelimit", `"x";r=0;t=0.25`), 250 * ms, true},
		{"older draft RateLimit-Reset on a 429", 429, hdr("Ratelimit-Reset", "12"), 12 * time.Second, true},
		{"older draft RateLimit-Reset with quota left on a 503", 503, hdr("Ratelimit-Reset", "12", "Ratelimit-Remaining", "4"), 0, false},
		{"older draft RateLimit-Reset at 0 on a 503", 503, hdr("Ratelimit-Reset", "12", "Ratelimit-Remaining", "0"), 12 * time.Second, true},
		{"RateLimit-Reset as a Unix time (GitLab's 429)", 429, hdr("Ratelimit-Limit", "600", "Ratelimit-Observed", "600", "Ratelimit-Remaining", "0",
			"Ratelimit-Reset", strconv.FormatInt(hintNow.Add(45*time.Second).Unix(), 10),
			"Ratelimit-Resettime", hintNow.Add(45*time.Second).UTC().Format(http.TimeFormat)), 45 * time.Second, true},
		{"OpenAI requests exhausted", 429, hdr("X-Ratelimit-Reset-Requests", "2s", "X-Ratelimit-Remaining-Requests", "0", "X-Ratelimit-Reset-Tokens", "6m0s", "X-Ratelimit-Remaining-Tokens", "900"), 2 * time.Second, true},
		{"OpenAI tokens exhausted", 429, hdr("X-Ratelimit-Reset-Requests", "2s", "X-Ratelimit-Remaining-Requests", "10", "X-Ratelimit-Reset-Tokens", "20ms", "X-Ratelimit-Remaining-Tokens", "0"), 20 * ms, true},
		{"OpenAI neither said: the soonest, on a 429", 429, hdr("X-Ratelimit-Reset-Requests", "1s", "X-Ratelimit-Reset-Tokens", "6m0s"), time.Second, true},
		{"OpenAI garbage", 429, hdr("X-Ratelimit-Reset-Requests", "later"), 0, false},
		{"X-RateLimit-Reset as seconds", 429, hdr("X-Ratelimit-Reset", "30"), 30 * time.Second, true},
		{"X-RateLimit-Reset as a Unix time (GitHub)", 403 + 26, hdr("X-Ratelimit-Reset", strconv.FormatInt(hintNow.Add(90*time.Second).Unix(), 10)), 90 * time.Second, true},
		{"X-RateLimit-Reset in the past: go now", 429, hdr("X-Ratelimit-Reset", strconv.FormatInt(hintNow.Add(-time.Hour).Unix(), 10)), 0, true},
		{"X-RateLimit-Reset with quota left on a 503", 503, hdr("X-Ratelimit-Reset", "30", "X-Ratelimit-Remaining", "12"), 0, false},
		{"X-RateLimit-Reset at 0 on a 503", 503, hdr("X-Ratelimit-Reset", "30", "X-Ratelimit-Remaining", "0"), 30 * time.Second, true},
		{"nothing", 503, hdr(), 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := &http.Response{StatusCode: tc.status, Header: tc.h}
			got, ok := ServerWait(resp, hintNow, nil)
			assert.Equal(t, tc.ok, ok)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestRateLimitResetUnits(t *testing.T) {
	resp := &http.Response{StatusCode: 429, Header: hdr("X-Reset", "1764504000")}
	d, ok := RateLimitReset("X-Reset", ResetUnitSeconds)(resp, hintNow)
	assert.True(t, ok)
	assert.Greater(t, d, 24*365*time.Hour, "read as seconds it is decades: the caller's MaxRetryAfter turns it into a give-up")
	d, ok = RateLimitReset("x-reset", ResetUnitUnix)(resp, time.Unix(1764504000-5, 0))
	assert.True(t, ok)
	assert.Equal(t, 5*time.Second, d)
	resp = &http.Response{StatusCode: 429, Header: hdr("X-Reset", "5")}
	d, _ = RateLimitReset("X-Reset", ResetUnitUnix)(resp, hintNow)
	assert.Equal(t, time.Duration(0), d, "a Unix time of 5 is long past")
}

// Through the Transport: the hint replaces the backoff, a user's dialect
// can be added, and a wait past MaxRetryAfter is a give-up.
func TestRetryHintsInTransport(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := script(step{status: 429, header: hdr("X-Ratelimit-Reset-Requests", "2s", "X-Ratelimit-Remaining-Requests", "0")}, status(200))
		tr := &Transport{Base: base, Policy: Policy{Jitter: JitterNone}}
		resp, err := tr.RoundTrip(newReq(t, "GET", "", nil))
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, []time.Duration{2 * time.Second}, base.gaps())

		custom := func(resp *http.Response, now time.Time) (time.Duration, bool) {
			if v := resp.Header.Get("X-Backoff-Seconds"); v != "" {
				n, err := strconv.Atoi(v)
				return time.Duration(n) * time.Second, err == nil
			}
			return 0, false
		}
		base = script(step{status: 503, header: hdr("X-Backoff-Seconds", "7")}, status(200))
		tr = &Transport{Base: base, Policy: Policy{Jitter: JitterNone}, RetryHints: append(DefaultRetryHints(), custom)}
		resp, err = tr.RoundTrip(newReq(t, "GET", "", nil))
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, []time.Duration{7 * time.Second}, base.gaps())

		base = script(step{status: 429, header: hdr("Ratelimit", `"day";r=0;t=86400`)}, status(200))
		var events []Event
		tr = &Transport{Base: base, Hooks: []Hook{retryHook(func(e Event) { events = append(events, e) })}}
		resp, err = tr.RoundTrip(newReq(t, "GET", "", nil))
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, 429, resp.StatusCode, "a day's wait is the server's answer")
		assert.Equal(t, ReasonRetryAfterTooLong, events[0].GiveUp)

		base = script(step{status: 503, header: hdr("X-Amz-Retry-After", "3600000")}, status(200))
		events = nil
		tr = &Transport{Base: base, Hooks: []Hook{retryHook(func(e Event) { events = append(events, e) })}}
		resp, err = tr.RoundTrip(newReq(t, "GET", "", nil))
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, ReasonRetryAfterTooLong, events[0].GiveUp, "an hour of x-amz-retry-after is capped like Retry-After")

		base = script(step{status: 429, header: hdr("Retry-After-Ms", "300")}, status(200))
		tr = &Transport{Base: base, Policy: Policy{Jitter: JitterNone}, RetryHints: []RetryHint{}}
		resp, err = tr.RoundTrip(newReq(t, "GET", "", nil))
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, []time.Duration{200 * time.Millisecond}, base.gaps(), "no hints: the backoff")
	})
}

// The servers' own advice.
func TestServerRetrySignals(t *testing.T) {
	for _, tc := range []struct {
		name     string
		method   string
		first    step
		attempts int
	}{
		{"X-Should-Retry: false stops a 503", "GET", step{status: 503, header: hdr("X-Should-Retry", "false")}, 1},
		{"Stripe-Should-Retry: false stops a 503", "GET", step{status: 503, header: hdr("Stripe-Should-Retry", "false")}, 1},
		{"X-Should-Retry: true retries a safe 400", "GET", step{status: 400, header: hdr("X-Should-Retry", "true")}, 2},
		{"Stripe-Should-Retry: true retries a keyed POST's 400", "POST-key", step{status: 400, header: hdr("Stripe-Should-Retry", "true")}, 2},
		{"true cannot make an unsafe POST retryable", "POST", step{status: 503, header: hdr("X-Should-Retry", "true")}, 1},
		{"no signal: the rules", "GET", status(503), 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := script(tc.first, status(200))
			var req *http.Request
			switch tc.method {
			case "POST-key":
				req = newReq(t, "POST", "{}", http.Header{"Idempotency-Key": {"k"}})
			case "POST":
				req = newReq(t, "POST", "{}", nil)
			default:
				req = newReq(t, "GET", "", nil)
			}
			resp, err := (&Transport{Base: base, Policy: noWait}).RoundTrip(req)
			require.NoError(t, err)
			resp.Body.Close()
			assert.Equal(t, tc.attempts, base.attempts())
		})
	}
	t.Run("the hook comes first", func(t *testing.T) {
		base := script(step{status: 503, header: hdr("X-Should-Retry", "false")}, status(200))
		tr := &Transport{Base: base, Policy: noWait, ShouldRetry: func(_ *http.Request, resp *http.Response, _ error) (Decision, error) {
			if resp.StatusCode == 503 {
				return DecisionRetry, nil
			}
			return DecisionDefer, nil
		}}
		resp, err := tr.RoundTrip(newReq(t, "GET", "", nil))
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, 2, base.attempts())
	})
}

// The attempt number as a header, opt-in.
func TestAttemptHeader(t *testing.T) {
	base := script(status(503), status(503), status(200))
	req := newReq(t, "GET", "", nil)
	resp, err := (&Transport{Base: base, Policy: noWait, AttemptHeader: "X-Attempt"}).RoundTrip(req)
	require.NoError(t, err)
	resp.Body.Close()
	var got []string
	for _, c := range base.seen() {
		got = append(got, c.header.Get("X-Attempt"))
	}
	assert.Equal(t, []string{"1", "2", "3"}, got)
	assert.Empty(t, req.Header.Get("X-Attempt"), "the caller's header is untouched")
}

// ShouldRetry sees a bounded prefix of an error body; the caller
// gets it all.
func TestPeekBody(t *testing.T) {
	throttled := `{"__type":"com.amazonaws#ThrottlingException","message":"Rate exceeded"}` + strings.Repeat(" ", 4000)
	n := 0
	base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		n++
		body := throttled
		if n == 3 {
			body = `{"__type":"ValidationException"}`
		}
		return &http.Response{StatusCode: 400, Header: http.Header{}, Body: io.NopCloser(strings.NewReader(body))}, nil
	})
	var seen [][]byte
	tr := &Transport{Base: base, Policy: noWait, PeekBody: 64, ShouldRetry: func(_ *http.Request, resp *http.Response, _ error) (Decision, error) {
		p := BodyPrefix(resp)
		seen = append(seen, p)
		if bytes.Contains(p, []byte("ThrottlingException")) {
			return DecisionRetry, nil
		}
		return DecisionDefer, nil
	}}
	resp, err := tr.RoundTrip(newReq(t, "GET", "", nil))
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, 3, n, "two throttles retried, the validation error returned")
	assert.Equal(t, `{"__type":"ValidationException"}`, string(b), "the whole body, prefix included")
	require.Len(t, seen, 3)
	assert.Len(t, seen[0], 64, "bounded")
	assert.Nil(t, BodyPrefix(&http.Response{Body: http.NoBody}))
}

// FuzzRetryHints: no header value makes a hint panic or answer a negative
// wait, and each is a function of its input.
func FuzzRetryHints(f *testing.F) {
	for _, s := range []string{"30", "1764504000", "2s", "6m0s", `"d";r=0;t=30`, `a;r=0;t=1e400`, "-1", "NaN", "1e308", "", ";;;,,=", `"x";r=0;t=18446744073709551616`} {
		f.Add(s, 429)
	}
	f.Fuzz(func(t *testing.T, v string, status int) {
		h := http.Header{}
		for _, k := range []string{"Retry-After-Ms", "Ratelimit", "Ratelimit-Reset", "X-Ratelimit-Reset-Requests", "X-Ratelimit-Reset-Tokens", "X-Ratelimit-Reset", "X-Ratelimit-Remaining"} {
			h.Set(k, v)
		}
		resp := &http.Response{StatusCode: status, Header: h}
		for i, hint := range DefaultRetryHints() {
			d1, ok1 := hint(resp, hintNow)
			d2, ok2 := hint(resp, hintNow)
			if d1 < 0 || d1 != d2 || ok1 != ok2 {
				t.Fatalf("hint %d on %q: %v %v then %v %v", i, v, d1, ok1, d2, ok2)
			}
		}
	})
}

// The first hint that answers wins: a hint of one's own put before the
// defaults reads a header they would read otherwise.
func TestOwnHintBeforeTheDefaults(t *testing.T) {
	resp := &http.Response{StatusCode: 429, Header: hdr("X-Ratelimit-Reset", "30")}
	mine := RateLimitReset("X-RateLimit-Reset", ResetUnitUnix) // this API sends an epoch, even a small one
	if d, ok := ServerWait(resp, hintNow, append(DefaultRetryHints(), mine)); !ok || d != 30*time.Second {
		t.Errorf("appended: %v %v, want the default's 30 s", d, ok)
	}
	if d, ok := ServerWait(resp, hintNow, append([]RetryHint{mine}, DefaultRetryHints()...)); !ok || d != 0 {
		t.Errorf("put first: %v %v, want the own hint's reading (an epoch long past: go now)", d, ok)
	}
}

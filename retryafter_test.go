package retryhttp

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
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

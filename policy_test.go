package retryhttp

import (
	"errors"
	"math"
	"reflect"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retryhttp/retryhttp/internal/backoff"
	"github.com/retryhttp/retryhttp/internal/circuit"
	"github.com/retryhttp/retryhttp/internal/defaults"
)

// backoffOf is the wait a Transport with policy p computes.
func backoffOf(p Policy, n int, prev time.Duration, r float64) time.Duration {
	rp, err := p.resolve()
	if err != nil {
		panic(err)
	}
	return rp.backoff(n, prev, r, false)
}

func TestPolicyValidate(t *testing.T) {
	assert.NoError(t, Policy{}.Validate(), "the zero Policy is the default")
	for _, tc := range []struct {
		p    Policy
		want string
	}{
		{Policy{MaxAttempts: -1}, "MaxAttempts -1 is negative"},
		{Policy{BaseDelay: -1}, "BaseDelay -1ns is negative"},
		{Policy{MaxDelay: -1}, "MaxDelay -1ns is negative"},
		{Policy{ThrottleDelay: -1}, "ThrottleDelay -1ns is negative"},
		{Policy{MaxElapsed: -1}, "MaxElapsed -1ns is negative"},
		{Policy{AttemptTimeout: -1}, "AttemptTimeout -1ns is negative"},
		{Policy{MaxRetryAfter: -1}, "MaxRetryAfter -1ns is negative"},
		{Policy{MaxBufferedBody: -1}, "MaxBufferedBody -1 is negative"},
		{Policy{Jitter: 9}, "unknown Jitter(9)"},
	} {
		err := tc.p.Validate()
		assert.ErrorIs(t, err, ErrInvalidPolicy)
		assert.ErrorContains(t, err, tc.want)
		assert.True(t, errors.Is(err, ErrInvalidPolicy))
	}
}

func TestBackoff(t *testing.T) {
	ms := time.Millisecond
	p := func(j Jitter) Policy { return Policy{BaseDelay: 100 * ms, MaxDelay: time.Second, Jitter: j} }
	cases := []struct {
		name   string
		policy Policy
		n      int
		prev   time.Duration
		r      float64
		want   time.Duration
	}{
		{"none n=0", p(JitterNone), 0, 0, 0.5, 100 * ms},
		{"none n=1", p(JitterNone), 1, 0, 0.5, 200 * ms},
		{"none n=3", p(JitterNone), 3, 0, 0.5, 800 * ms},
		{"none capped", p(JitterNone), 4, 0, 0.5, time.Second},
		{"none n=1000 does not overflow", p(JitterNone), 1000, 0, 0.5, time.Second},
		{"none negative n is the first", p(JitterNone), -3, 0, 0.5, 100 * ms},
		{"full r=0", p(JitterFull), 2, 0, 0, 0},
		{"full r=0.5", p(JitterFull), 2, 0, 0.5, 200 * ms},
		{"full r just below 1", p(JitterFull), 2, 0, 0.999999, 399999600 * time.Nanosecond},
		{"full capped", p(JitterFull), 10, 0, 0.5, 500 * ms},
		{"full n=63", p(JitterFull), 63, 0, 0.25, 250 * ms},
		{"equal r=0 is half", p(JitterEqual), 2, 0, 0, 200 * ms},
		{"equal r=0.5", p(JitterEqual), 2, 0, 0.5, 300 * ms},
		{"equal capped", p(JitterEqual), 9, 0, 0.5, 750 * ms},
		{"decorrelated first: U(base, 3*base)", p(JitterDecorrelated), 0, 0, 0.5, 200 * ms},
		{"decorrelated r=0 is base", p(JitterDecorrelated), 5, 300 * ms, 0, 100 * ms},
		{"decorrelated from prev", p(JitterDecorrelated), 5, 300 * ms, 0.5, 500 * ms},
		{"decorrelated capped", p(JitterDecorrelated), 5, 900 * ms, 0.9, time.Second},
		{"zero policy: default base 200ms, n=0 none", Policy{Jitter: JitterNone}, 0, 0, 0, 200 * ms},
		{"zero policy: default cap 10s", Policy{Jitter: JitterNone}, 20, 0, 0, 10 * time.Second},
		{"base above cap waits the cap", Policy{BaseDelay: 5 * time.Second, MaxDelay: time.Second, Jitter: JitterNone}, 0, 0, 0, time.Second},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, backoffOf(tc.policy, tc.n, tc.prev, tc.r))
		})
	}
	t.Run("decorrelated huge prev does not overflow", func(t *testing.T) {
		p := Policy{BaseDelay: ms, MaxDelay: math.MaxInt64, Jitter: JitterDecorrelated}
		got := backoffOf(p, 5, math.MaxInt64/2, 0.5)
		// float64 arithmetic at this size: exact to within a microsecond.
		assert.InDelta(t, float64(math.MaxInt64/2+ms/2), float64(got), float64(time.Microsecond))
	})
}

// TestBackoffBounds checks every strategy against its stated range for many
// random numbers and attempts.
func TestBackoffBounds(t *testing.T) {
	for _, j := range []Jitter{JitterFull, JitterEqual, JitterDecorrelated, JitterNone} {
		p := Policy{BaseDelay: 50 * time.Millisecond, MaxDelay: 3 * time.Second, Jitter: j}
		var prev time.Duration
		for n := range 80 {
			r := float64((n*7919)%1000) / 1000
			d := backoffOf(p, n, prev, r)
			c := backoff.Ceiling(p.BaseDelay, p.MaxDelay, n)
			switch j {
			case JitterFull:
				assert.True(t, d >= 0 && d <= c, "%v n=%d: %v", j, n, d)
			case JitterEqual:
				assert.True(t, d >= c/2 && d <= c, "%v n=%d: %v", j, n, d)
			case JitterDecorrelated:
				assert.True(t, d >= p.BaseDelay && d <= p.MaxDelay && d <= 3*max(prev, p.BaseDelay), "%v n=%d prev=%v: %v", j, n, prev, d)
			case JitterNone:
				assert.Equal(t, c, d)
			}
			prev = d
		}
	}
}

func TestJitterString(t *testing.T) {
	assert.Equal(t, "full", JitterFull.String())
	assert.Equal(t, "decorrelated", JitterDecorrelated.String())
	assert.Equal(t, "Jitter(7)", Jitter(7).String())
}

// The wait between attempts doubles from BaseDelay up to MaxDelay, and
// zero fields take the defaults.
func TestPolicyBackoff(t *testing.T) {
	wait := func(p Policy, n int, r float64) time.Duration {
		rp, err := p.resolve()
		require.NoError(t, err)
		return rp.backoff(n-1, 0, r, false)
	}
	p := Policy{BaseDelay: 100 * time.Millisecond, MaxDelay: time.Second, Jitter: JitterNone}
	for n, want := range map[int]time.Duration{1: 100 * time.Millisecond, 2: 200 * time.Millisecond, 3: 400 * time.Millisecond, 5: time.Second, 60: time.Second} {
		assert.Equal(t, want, wait(p, n, 0.5), "retry %d", n)
	}
	full := Policy{BaseDelay: 100 * time.Millisecond}
	assert.Equal(t, 50*time.Millisecond, wait(full, 1, 0.5), "full jitter: half the ceiling at r = 0.5")
	assert.Equal(t, defaults.BaseDelay/2, wait(Policy{}, 1, 0.5), "zero fields take the defaults")
}

// Every Reason has its label and text, and the exported constants that
// godoc shows as literals mean what the internal packages do.
func TestReasonsTable(t *testing.T) {
	labels := map[string]bool{}
	for r := ReasonNone; r < numReasons; r++ {
		e := reasons[r]
		assert.NotEmpty(t, e.label, "Reason %d has no label", r)
		assert.NotEmpty(t, e.text, "Reason %d has no text", r)
		assert.False(t, labels[e.label], "label %q twice", e.label)
		labels[e.label] = true
	}
	assert.Equal(t, CircuitState(circuit.Closed), CircuitClosed)
	assert.Equal(t, CircuitState(circuit.HalfOpen), CircuitHalfOpen)
	assert.Equal(t, CircuitState(circuit.Open), CircuitOpen)
	assert.Equal(t, Jitter(backoff.Full), JitterFull)
	assert.Equal(t, Jitter(backoff.Equal), JitterEqual)
	assert.Equal(t, Jitter(backoff.Decorrelated), JitterDecorrelated)
	assert.Equal(t, Jitter(backoff.None), JitterNone)
}

// ThrottleDelay is the base of the waits after a 429, and the spread of a
// wait the server names; a failure's waits start from BaseDelay.
func TestThrottleDelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := script(status(429), status(429), status(503), retryAfter(503, "2"), status(200))
		tr := &Transport{Base: base, Budget: NoBudget,
			Policy: Policy{MaxAttempts: 5, BaseDelay: 50 * time.Millisecond, ThrottleDelay: time.Second, Jitter: JitterNone}}
		resp, err := tr.RoundTrip(newReq(t, "GET", "", nil))
		require.NoError(t, err)
		resp.Body.Close()
		// 429: 1s, 429: 2s (doubled), 503: 200ms (BaseDelay doubled
		// twice), Retry-After 2: 2s with no spread (JitterNone).
		assert.Equal(t, []time.Duration{time.Second, 2 * time.Second, 200 * time.Millisecond, 2 * time.Second}, base.gaps())

		base = script(status(429), status(200))
		tr = &Transport{Base: base, Budget: NoBudget, Policy: Policy{BaseDelay: 50 * time.Millisecond, Jitter: JitterNone}}
		resp, err = tr.RoundTrip(newReq(t, "GET", "", nil))
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, []time.Duration{50 * time.Millisecond}, base.gaps(), "ThrottleDelay 0 is BaseDelay")
	})
}

// A Transport resolves its Policy once and again after any field of it
// changes: a change of any one field is seen on the next RoundTrip.
func TestResolvedPolicyFollowsEveryField(t *testing.T) {
	base := Policy{MaxAttempts: 3, BaseDelay: time.Millisecond}
	tr := &Transport{Policy: base}
	if _, err := tr.policy(nil); err != nil {
		t.Fatal(err)
	}
	typ := reflect.TypeOf(base)
	for i := range typ.NumField() {
		changed := base
		f := reflect.ValueOf(&changed).Elem().Field(i)
		switch f.Kind() {
		case reflect.Bool:
			f.SetBool(!f.Bool())
		case reflect.Int, reflect.Int64:
			f.SetInt(f.Int() + 1)
		default:
			t.Fatalf("field %s is a %s, which this test does not change: extend it", typ.Field(i).Name, f.Kind())
		}
		tr.Policy = changed
		if _, err := tr.policy(nil); err != nil {
			t.Fatal(err)
		}
		if got := tr.resolved.Load().src; got != changed {
			t.Errorf("Policy.%s changed, and the Transport kept its old resolution", typ.Field(i).Name)
		}
	}
}

package docs

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/failsafe-go/failsafe-go"
	"github.com/failsafe-go/failsafe-go/budget"
	"github.com/failsafe-go/failsafe-go/circuitbreaker"
	"github.com/failsafe-go/failsafe-go/failsafehttp"
	"github.com/failsafe-go/failsafe-go/timeout"

	"github.com/retryhttp/retryhttp"
)

// The rows of docs/MIGRATING.md's failsafe-go table, each run in both
// forms against the same script, under testing/synctest.

// viaFailsafe is an http.Client sending through failsafehttp's round
// tripper over s.
func viaFailsafe(s *scripted, policies ...failsafe.Policy[*http.Response]) *http.Client {
	return &http.Client{Transport: failsafehttp.NewRoundTripper(s, policies...)}
}

func call(c *http.Client) string { return got(c.Get("http://api.test/x")) }

var failsafeRows = map[string]func(t *testing.T){
	"`WithMaxRetries(n)` / `WithMaxAttempts(n)`": func(t *testing.T) {
		b, a := script(503), script(503)
		call(viaFailsafe(b, failsafehttp.NewRetryPolicyBuilder().WithMaxRetries(3).WithBackoff(time.Millisecond, time.Millisecond).ReturnLastFailure().Build()))
		call(after(a, &retryhttp.Transport{Policy: retryhttp.Policy{MaxAttempts: 4, BaseDelay: time.Millisecond}}))
		same(t, "three retries are four attempts", b.attempts(), a.attempts(), 4)
	},
	"`WithBackoff(min, max)`": func(t *testing.T) {
		b, a := script(503, 503, 503, 200), script(503, 503, 503, 200)
		call(viaFailsafe(b, failsafehttp.NewRetryPolicyBuilder().WithMaxRetries(3).WithBackoff(time.Second, 30*time.Second).Build()))
		call(after(a, &retryhttp.Transport{Policy: retryhttp.Policy{BaseDelay: time.Second, MaxDelay: 30 * time.Second, Jitter: retryhttp.JitterNone}}))
		same(t, "doubling waits", fmt.Sprint(b.waits()), fmt.Sprint(a.waits()), "[1s 2s 4s]")
	},
	"`WithJitter`, `WithJitterFactor`": func(t *testing.T) {
		b, a := script(503, 503, 503, 200), script(503, 503, 503, 200)
		call(viaFailsafe(b, failsafehttp.NewRetryPolicyBuilder().WithMaxRetries(3).WithBackoff(time.Second, 30*time.Second).WithJitterFactor(0.5).Build()))
		call(after(a, &retryhttp.Transport{Policy: retryhttp.Policy{BaseDelay: time.Second, MaxDelay: 30 * time.Second, Jitter: retryhttp.JitterEqual}}))
		for i, ceiling := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second} {
			if w := b.waits()[i]; w < ceiling/2 || w > ceiling*3/2 {
				t.Errorf("failsafe-go's wait %d: %v, want within ±50%% of %v", i+1, w, ceiling)
			}
			if w := a.waits()[i]; w < ceiling/2 || w > ceiling {
				t.Errorf("JitterEqual's wait %d: %v, want within [%v, %v]", i+1, w, ceiling/2, ceiling)
			}
		}
	},
	"`WithMaxDuration`": func(t *testing.T) {
		b, a := script(503), script(503)
		start := time.Now()
		call(viaFailsafe(b, failsafehttp.NewRetryPolicyBuilder().WithMaxRetries(10).WithBackoff(time.Second, time.Second).WithMaxDuration(2500*time.Millisecond).ReturnLastFailure().Build()))
		theirs := time.Since(start)
		start = time.Now()
		call(after(a, &retryhttp.Transport{Policy: retryhttp.Policy{MaxAttempts: 100, BaseDelay: time.Second, MaxDelay: time.Second, Jitter: retryhttp.JitterNone, MaxElapsed: 2500 * time.Millisecond}}))
		ours := time.Since(start)
		// Both end the call by 2.5 s. failsafe-go then sends what retries
		// are left without waiting; the Transport makes no retry whose wait
		// would end past MaxElapsed (3 attempts, at 0, 1 and 2 s).
		if theirs > 2500*time.Millisecond || ours > 2500*time.Millisecond || a.attempts() != 3 {
			t.Errorf("failsafe-go took %v (%d attempts), the Transport %v (%d attempts); want both within 2.5s, the Transport in 3", theirs, b.attempts(), ours, a.attempts())
		}
	},
	"`HandleIf(...)`, `AbortIf(...)`": func(t *testing.T) {
		b, a := script(500, 200), script(500, 200)
		call(viaFailsafe(b, failsafehttp.NewRetryPolicyBuilder().HandleIf(func(r *http.Response, _ error) bool { return r != nil && r.StatusCode == 500 }).
			WithBackoff(time.Millisecond, time.Millisecond).Build()))
		call(after(a, &retryhttp.Transport{Policy: retryhttp.Policy{BaseDelay: time.Millisecond}, ShouldRetry: func(_ *http.Request, r *http.Response, _ error) (retryhttp.Decision, error) {
			if r != nil && r.StatusCode == 500 {
				return retryhttp.DecisionRetry, nil
			}
			return retryhttp.DecisionDefer, nil
		}}))
		same(t, "a 500 retried by the predicate", b.attempts(), a.attempts(), 2)
	},
	"`WithDelayFunc(failsafehttp.DelayFunc)`": func(t *testing.T) {
		retryAfter := func(s *scripted) http.RoundTripper {
			return roundTripFunc(func(r *http.Request) (*http.Response, error) {
				resp, err := s.RoundTrip(r)
				if resp != nil && resp.StatusCode == 429 {
					resp.Header.Set("Retry-After", "2")
				}
				return resp, err
			})
		}
		b, a := script(429, 200), script(429, 200)
		got((&http.Client{Transport: failsafehttp.NewRoundTripper(retryAfter(b), failsafehttp.NewRetryPolicyBuilder().
			WithDelayFunc(failsafehttp.DelayFunc).Build())}).Get("http://api.test/x"))
		got((&http.Client{Transport: &retryhttp.Transport{Base: retryAfter(a), Logger: silent, Policy: retryhttp.Policy{Jitter: retryhttp.JitterNone}}}).Get("http://api.test/x"))
		same(t, "Retry-After's wait", fmt.Sprint(b.waits()), fmt.Sprint(a.waits()), "[2s]")
	},
	"`WithBudget`": func(t *testing.T) {
		b, a := script(503, 200), script(503, 200)
		spent := budget.NewBuilder().WithMaxRate(0).WithMinConcurrency(0).Build()
		call(viaFailsafe(b, failsafehttp.NewRetryPolicyBuilder().WithBudget(spent).WithBackoff(time.Millisecond, time.Millisecond).ReturnLastFailure().Build()))
		none, err := retryhttp.NewBudget(retryhttp.BudgetOptions{Ratio: 1e-9, MinPerSecond: 1e-9})
		if err != nil {
			t.Fatal(err)
		}
		call(after(a, &retryhttp.Transport{Budget: none, Policy: retryhttp.Policy{BaseDelay: time.Millisecond}}))
		// failsafe-go's budget bounds the retries in flight at once (this
		// one, alone, is let through); the Transport's bounds retries over
		// time, a share of the requests, so an empty one allows none.
		if b.attempts() != 2 || a.attempts() != 1 {
			t.Errorf("failsafe-go %d attempts, the Transport %d; want 2 (a retry in flight alone) and 1 (no tokens)", b.attempts(), a.attempts())
		}
	},
	"`ReturnLastFailure()`": func(t *testing.T) {
		b, a := script(503), script(503)
		r1 := call(viaFailsafe(b, failsafehttp.NewRetryPolicyBuilder().WithMaxRetries(2).WithBackoff(time.Millisecond, time.Millisecond).ReturnLastFailure().Build()))
		r2 := call(after(a, &retryhttp.Transport{Policy: retryhttp.Policy{MaxAttempts: 3, BaseDelay: time.Millisecond}}))
		same(t, "the last response", r1, r2, "503")
	},
	"`circuitbreaker.Builder`": func(t *testing.T) {
		b, a := script(503), script(503)
		cb := circuitbreaker.NewBuilder[*http.Response]().HandleIf(func(r *http.Response, err error) bool { return err != nil || r.StatusCode >= 500 }).
			WithFailureThreshold(2).WithDelay(time.Minute).Build()
		fc := viaFailsafe(b, cb)
		br, err := retryhttp.NewBreaker(retryhttp.BreakerOptions{Failures: 2, OpenFor: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		rc := after(a, &retryhttp.Transport{Breaker: br, Policy: retryhttp.Policy{MaxAttempts: 1}})
		for range 2 {
			call(fc)
			call(rc)
		}
		_, e1 := fc.Get("http://api.test/x")
		_, e2 := rc.Get("http://api.test/x")
		same(t, "two failures open the circuit: the third call is refused, not sent", b.attempts(), a.attempts(), 2)
		if !errors.Is(e1, circuitbreaker.ErrOpen) || !errors.Is(e2, retryhttp.ErrCircuitOpen) {
			t.Errorf("errors %v and %v; want each library's open circuit", e1, e2)
		}
	},
	"`timeout.New`": func(t *testing.T) {
		b, a := script(-1, 200), script(-1, 200)
		r1 := call(viaFailsafe(b, failsafehttp.NewRetryPolicyBuilder().WithBackoff(time.Millisecond, time.Millisecond).Build(), timeout.New[*http.Response](100*time.Millisecond)))
		r2 := call(after(a, &retryhttp.Transport{Policy: retryhttp.Policy{BaseDelay: time.Millisecond, AttemptTimeout: 100 * time.Millisecond}}))
		same(t, "a stalled attempt cut and retried", b.attempts(), a.attempts(), 2)
		same(t, "then answered", r1, r2, "200")
	},
	"`OnRetry`, `OnRetriesExceeded`": func(t *testing.T) {
		b, a := script(503, 503, 200), script(503, 503, 200)
		var theirs, ours int
		call(viaFailsafe(b, failsafehttp.NewRetryPolicyBuilder().WithBackoff(time.Millisecond, time.Millisecond).
			OnRetry(func(failsafe.ExecutionEvent[*http.Response]) { theirs++ }).Build()))
		call(after(a, &retryhttp.Transport{Policy: retryhttp.Policy{BaseDelay: time.Millisecond}, Hooks: []retryhttp.Hook{
			retryhttp.HookFunc(func(_ context.Context, e retryhttp.Event) {
				if e.Kind == retryhttp.EventRetry {
					ours++
				}
			})}}))
		same(t, "told of each retry", theirs, ours, 2)
	},
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

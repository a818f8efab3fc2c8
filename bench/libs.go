// Package bench compares retryhttp with the bare base transport,
// hashicorp/go-retryablehttp and failsafe-go's failsafehttp, on the same
// workloads in the same run. It is its own module so that the library's
// go.mod never lists the competitors.
package bench

import (
	"log/slog"
	"net/http"
	"time"

	"github.com/failsafe-go/failsafe-go/failsafehttp"
	"github.com/hashicorp/go-retryablehttp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/retryhttp/retryhttp"
	"github.com/retryhttp/retryhttp/overload"
)

// Lib wraps a base RoundTripper in one library's retrying RoundTripper,
// configured alike: up to 4 attempts, no wait between them, so the
// benchmarks measure the libraries and not their sleeps.
type Lib struct {
	Name string
	Wrap func(base http.RoundTripper) http.RoundTripper
}

// unbudgeted lets retryhttp retry every request, for workloads made of
// retries: its budgets would, as designed, refuse a 50% retry rate. The
// budget+breaker variant keeps paying for the budget's bookkeeping with a
// budget large enough never to refuse.
func unbudgeted(l Lib) Lib {
	switch l.Name {
	case "retryhttp", "retryhttp+metrics":
		wrap := l.Wrap
		l.Wrap = func(base http.RoundTripper) http.RoundTripper {
			t := wrap(base).(*retryhttp.Transport)
			t.Budget = retryhttp.NoBudget
			return t
		}
	case "retryhttp+budget+breaker", "retryhttp+all", "retryhttp+overload", "retryhttp+limit", "retryhttp+pacer":
		wrap := l.Wrap
		l.Wrap = func(base http.RoundTripper) http.RoundTripper {
			t := wrap(base).(*retryhttp.Transport)
			t.Budget = must(retryhttp.NewBudget(retryhttp.BudgetOptions{Ratio: 1, MinPerSecond: 1e9}))
			return t
		}
	}
	return l
}

// noWait is the retryhttp policy the comparisons use.
var noWait = retryhttp.Policy{MaxAttempts: 4, BaseDelay: time.Nanosecond, MaxDelay: time.Nanosecond, Jitter: retryhttp.JitterNone}

// silent keeps the Transport's give-up records out of the measurements, as
// the peers are run without their loggers.
var silent = slog.New(slog.DiscardHandler)

// Libs are the contenders, bare first.
func Libs() []Lib {
	return []Lib{
		{"bare", func(base http.RoundTripper) http.RoundTripper { return base }},
		{"retryhttp", func(base http.RoundTripper) http.RoundTripper {
			return &retryhttp.Transport{Base: base, Policy: noWait, Logger: silent}
		}},
		{"retryhttp+metrics", func(base http.RoundTripper) http.RoundTripper {
			return &retryhttp.Transport{Base: base, Policy: noWait, Logger: silent, Hooks: []retryhttp.Hook{must(retryhttp.NewMetrics(prometheus.NewRegistry(), retryhttp.MetricsOptions{}))}}
		}},
		{"retryhttp+budget+breaker", func(base http.RoundTripper) http.RoundTripper {
			return &retryhttp.Transport{Base: base, Policy: noWait, Logger: silent, Budget: must(retryhttp.NewBudget(retryhttp.BudgetOptions{})),
				Breaker: must(retryhttp.NewBreaker(retryhttp.BreakerOptions{}))}
		}},
		{"retryhttp+all", func(base http.RoundTripper) http.RoundTripper {
			return &retryhttp.Transport{Base: base, Policy: noWait, Logger: silent, Budget: must(retryhttp.NewBudget(retryhttp.BudgetOptions{})),
				Breaker: must(retryhttp.NewBreaker(retryhttp.BreakerOptions{})),
				Hooks:   []retryhttp.Hook{must(retryhttp.NewMetrics(prometheus.NewRegistry(), retryhttp.MetricsOptions{}))}}
		}},
		{"retryhttp+overload", func(base http.RoundTripper) http.RoundTripper {
			// The protections of a dependency under load: the budget, the
			// failure-ratio breaker, the throttle, and the metrics. OneRetry
			// fails half of all attempts (each request's first): a ratio of
			// 0.6 and K 3 keep that workload from opening the circuit or
			// being throttled, which at 0.5 and K 2 they rightly would at
			// times.
			return &retryhttp.Transport{Base: base, Policy: noWait, Logger: silent, Budget: must(retryhttp.NewBudget(retryhttp.BudgetOptions{})),
				Breaker:  must(retryhttp.NewBreaker(retryhttp.BreakerOptions{FailureRatio: 0.6})),
				Throttle: must(retryhttp.NewThrottle(retryhttp.ThrottleOptions{K: 3})),
				Hooks:    []retryhttp.Hook{must(retryhttp.NewMetrics(prometheus.NewRegistry(), retryhttp.MetricsOptions{}))}}
		}},
		{"retryhttp+limit", func(base http.RoundTripper) http.RoundTripper {
			// +all with the adaptive concurrency limit per host, at its
			// defaults, with a queue so that Parallel64's goroutines wait
			// rather than being refused.
			return &retryhttp.Transport{Base: base, Policy: noWait, Logger: silent, Budget: must(retryhttp.NewBudget(retryhttp.BudgetOptions{})),
				Breaker: must(retryhttp.NewBreaker(retryhttp.BreakerOptions{})),
				Limit:   must(overload.NewLimiter(overload.Options{Queue: 64})),
				Hooks:   []retryhttp.Hook{must(retryhttp.NewMetrics(prometheus.NewRegistry(), retryhttp.MetricsOptions{}))}}
		}},
		{"retryhttp+pacer", func(base http.RoundTripper) http.RoundTripper {
			// +all with a Pacer, on a host that sends no rate-limit header:
			// what pacing costs where it has nothing to pace.
			return &retryhttp.Transport{Base: base, Policy: noWait, Logger: silent, Budget: must(retryhttp.NewBudget(retryhttp.BudgetOptions{})),
				Breaker: must(retryhttp.NewBreaker(retryhttp.BreakerOptions{})),
				Pacer:   &retryhttp.Pacer{},
				Hooks:   []retryhttp.Hook{must(retryhttp.NewMetrics(prometheus.NewRegistry(), retryhttp.MetricsOptions{}))}}
		}},
		{"go-retryablehttp", func(base http.RoundTripper) http.RoundTripper {
			c := retryablehttp.NewClient()
			c.HTTPClient = &http.Client{Transport: base}
			c.Logger = nil
			c.RetryMax = 3
			c.RetryWaitMin, c.RetryWaitMax = 0, 0
			return &retryablehttp.RoundTripper{Client: c}
		}},
		{"failsafehttp", func(base http.RoundTripper) http.RoundTripper {
			return failsafehttp.NewRoundTripper(base, failsafehttp.NewRetryPolicyBuilder().WithMaxRetries(3).WithDelay(0).Build())
		}},
	}
}

// Competitors are the libraries other than bare and retryhttp's variants.
func Competitors() []Lib {
	var out []Lib
	for _, l := range Libs() {
		if l.Name == "go-retryablehttp" || l.Name == "failsafehttp" || l.Name == "retryhttp" {
			out = append(out, l)
		}
	}
	return out
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

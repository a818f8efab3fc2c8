// Package defaults holds the values a zero field of the root package's
// options take (Policy, BreakerOptions, BudgetOptions, Hedging, Pacer,
// ThrottleOptions), in one place, so that the Transport and the storm
// simulator in cmd/retrystorm run on the same numbers. The reason for each
// value is in the doc of the field it fills.
package defaults

import "time"

// Policy.
const (
	MaxAttempts     = 4
	BaseDelay       = 200 * time.Millisecond
	MaxDelay        = 10 * time.Second
	MaxElapsed      = 30 * time.Second
	MaxRetryAfter   = 30 * time.Second
	MaxBufferedBody = 1 << 20
)

// BreakerOptions.
const (
	BreakerFailures = 5
	BreakerOpenFor  = 30 * time.Second
	BreakerProbes   = 1
	BreakerMaxHosts = 1024
	BreakerWindow   = 30 * time.Second
	BreakerMinCalls = 20
)

// BudgetOptions.
const (
	BudgetRatio        = 0.1
	BudgetMinPerSecond = 10
	BudgetWindow       = 10 * time.Second
)

// Hedging.
const (
	HedgeQuantile = 0.95
	MaxHedges     = 1
)

// ThrottleOptions: K and the window are the SRE book's.
const (
	ThrottleK        = 2
	ThrottleWindow   = 2 * time.Minute
	ThrottleMaxHosts = 1024
	// ThrottleMinRequests: at 20 attempts in the window, one accepted in
	// ten already leaves most of a retry storm rejected.
	ThrottleMinRequests = 20
)

// Pacer.
const PacerMaxWait = 30 * time.Second

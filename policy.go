package retryhttp

import (
	"fmt"
	"time"

	"github.com/retryhttp/retryhttp/internal/backoff"
	"github.com/retryhttp/retryhttp/internal/defaults"
)

// Policy says how many times a Transport tries, how long it waits between
// tries and how much it is willing to buffer to make a retry possible.
//
// The zero value is the default policy: every zero field takes the default
// named in its comment. Negative values are errors (see Validate), so a typo
// never silently disables retries.
type Policy struct {
	// MaxAttempts is the total number of attempts, the first included.
	// 0 means 4; 1 disables retries.
	MaxAttempts int

	// BaseDelay is the ceiling of the first backoff wait; each later ceiling
	// doubles it. 0 means 200ms.
	BaseDelay time.Duration

	// MaxDelay caps one backoff wait. 0 means 10s.
	MaxDelay time.Duration

	// ThrottleDelay is BaseDelay for the retries of throttling answers: a
	// 429, or a response whose server named a wait (Retry-After, a
	// rate-limit header), a server that says it is overloaded rather than
	// failing. It is the ceiling of the first backoff after a 429 that
	// names no wait, doubled like BaseDelay's, and the spread added to a
	// wait the server names. 0 means BaseDelay: throttling and failures
	// are waited out alike. The AWS SDKs' standard retry mode uses 1s
	// here and 50ms as BaseDelay: a throttling server needs the load to
	// go away, a failed attempt only a short pause before another
	// instance answers.
	ThrottleDelay time.Duration

	// MaxElapsed bounds the attempts and waits of one RoundTrip, measured from
	// the first send: a retry whose wait would end past it is not made. It does
	// not cut a running attempt short (that is the caller's deadline's job).
	// 0 means 30s.
	MaxElapsed time.Duration

	// AttemptTimeout bounds the wait for one attempt's response headers; an
	// attempt that times out is retried like a network timeout. Reading the
	// body of the returned response is not bounded by it. 0 means no bound.
	AttemptTimeout time.Duration

	// MaxRetryAfter is the longest Retry-After the Transport waits out. A
	// response asking for longer is returned to the caller at once, since a
	// server that says "come back in an hour" is not a transient failure.
	// 0 means 30s.
	MaxRetryAfter time.Duration

	// ExchangeTimeout, if positive, bounds each attempt from its send to
	// the end of its response body, as http.Client.Timeout bounds a
	// request: an attempt whose headers have not arrived by then is
	// retried like one past AttemptTimeout, and on the response returned
	// the timer keeps running, so that reading the body past it fails
	// with ErrAttemptTimeout (os.IsTimeout reports true). Use it where a
	// Client.Timeout bounded each attempt (go-retryablehttp's
	// HTTPClient.Timeout); a Client.Timeout above a Transport bounds all
	// the attempts and waits together. 0 means no bound.
	ExchangeTimeout time.Duration

	// MaxBufferedBody is the largest request body, in bytes, the Transport
	// copies into memory so it can be sent again when the request has no
	// GetBody. A longer body, or one of unknown length unless
	// BufferStreams, is streamed once and not retried. 0 means 1 MiB.
	MaxBufferedBody int64

	// BufferStreams makes a body of unknown length (a pipe, a reader
	// without GetBody or ContentLength) replayable when it has at most
	// MaxBufferedBody bytes: the Transport reads up to that much before
	// the first send, and sends what it read with a Content-Length, as
	// go-retryablehttp does with every body. A longer one is sent once,
	// streamed, what was read first included. Off by default, since it
	// reads the body before the first byte is sent.
	BufferStreams bool

	// RetryNonIdempotent retries requests whose method is not idempotent
	// (POST, PATCH, any other) and that carry no Idempotency-Key, under the
	// same rules as a GET, for an API you know to be safe to call twice
	// (or whose duplicates you accept). Off by default: a POST that timed
	// out may have been processed, and sending it again may charge twice.
	// A 429 does not prove otherwise: most servers refuse before doing the
	// work, but nothing in the status says so, and a proxy may answer 429
	// for a request the origin already took. Set it per Transport, or per
	// request with WithPolicy; InjectIdempotencyKey is the safe
	// alternative where the server honours keys.
	RetryNonIdempotent bool

	// Jitter picks how a backoff wait is randomised. The zero value is
	// JitterFull.
	Jitter Jitter
}

// Jitter selects how a backoff wait is drawn from its ceiling. Jitter spreads
// clients that failed together so they do not come back together; see
// "Exponential Backoff And Jitter" (AWS Architecture Blog, 2015).
type Jitter int

const (
	// JitterFull waits U(0, ceiling): the least total work and the flattest
	// load of the strategies, the default.
	JitterFull Jitter = 0
	// JitterEqual waits ceiling/2 + U(0, ceiling/2): never less than half
	// the ceiling.
	JitterEqual Jitter = 1
	// JitterDecorrelated waits min(MaxDelay, U(BaseDelay, 3*previous wait)).
	JitterDecorrelated Jitter = 2
	// JitterNone waits the ceiling exactly, and a wait the server names
	// (Retry-After, a rate-limit header) exactly as named, without the
	// spread of up to one ThrottleDelay the other strategies add to it.
	// Clients that failed together retry together; use it in tests, not
	// in production.
	JitterNone Jitter = 3
)

func (j Jitter) String() string {
	switch j {
	case JitterFull:
		return "full"
	case JitterEqual:
		return "equal"
	case JitterDecorrelated:
		return "decorrelated"
	case JitterNone:
		return "none"
	}
	return fmt.Sprintf("Jitter(%d)", int(j))
}

// Validate reports the first field out of range, as an error wrapping
// ErrInvalidPolicy. RoundTrip validates too, and sends nothing when the
// Policy is invalid; call Validate at start-up to learn of a typo before
// the first request does.
func (p Policy) Validate() error {
	switch {
	case p.MaxAttempts < 0:
		return fmt.Errorf("%w: MaxAttempts %d is negative", ErrInvalidPolicy, p.MaxAttempts)
	case p.BaseDelay < 0:
		return fmt.Errorf("%w: BaseDelay %v is negative", ErrInvalidPolicy, p.BaseDelay)
	case p.MaxDelay < 0:
		return fmt.Errorf("%w: MaxDelay %v is negative", ErrInvalidPolicy, p.MaxDelay)
	case p.ThrottleDelay < 0:
		return fmt.Errorf("%w: ThrottleDelay %v is negative", ErrInvalidPolicy, p.ThrottleDelay)
	case p.MaxElapsed < 0:
		return fmt.Errorf("%w: MaxElapsed %v is negative", ErrInvalidPolicy, p.MaxElapsed)
	case p.AttemptTimeout < 0:
		return fmt.Errorf("%w: AttemptTimeout %v is negative", ErrInvalidPolicy, p.AttemptTimeout)
	case p.MaxRetryAfter < 0:
		return fmt.Errorf("%w: MaxRetryAfter %v is negative", ErrInvalidPolicy, p.MaxRetryAfter)
	case p.MaxBufferedBody < 0:
		return fmt.Errorf("%w: MaxBufferedBody %d is negative", ErrInvalidPolicy, p.MaxBufferedBody)
	case p.Jitter < JitterFull || p.Jitter > JitterNone:
		return fmt.Errorf("%w: unknown %v", ErrInvalidPolicy, p.Jitter)
	}
	return nil
}

// resolve returns p with defaults filled in, or Validate's error.
func (p Policy) resolve() (Policy, error) {
	if err := p.Validate(); err != nil {
		return p, err
	}
	if p.MaxAttempts == 0 {
		p.MaxAttempts = defaults.MaxAttempts
	}
	if p.BaseDelay == 0 {
		p.BaseDelay = defaults.BaseDelay
	}
	if p.MaxDelay == 0 {
		p.MaxDelay = defaults.MaxDelay
	}
	if p.ThrottleDelay == 0 {
		p.ThrottleDelay = p.BaseDelay
	}
	if p.MaxElapsed == 0 {
		p.MaxElapsed = defaults.MaxElapsed
	}
	if p.MaxRetryAfter == 0 {
		p.MaxRetryAfter = defaults.MaxRetryAfter
	}
	if p.MaxBufferedBody == 0 {
		p.MaxBufferedBody = defaults.MaxBufferedBody
	}
	return p, nil
}

// backoff returns the wait before retry n (0-based) of a resolved Policy.
// prev is the previous wait (0 before the first retry; only
// JitterDecorrelated reads it) and r a uniform random number in [0, 1).
// A throttled retry's ceiling starts from ThrottleDelay.
func (p Policy) backoff(n int, prev time.Duration, r float64, throttled bool) time.Duration {
	base := p.BaseDelay
	if throttled {
		base = p.ThrottleDelay
	}
	return backoff.Delay(backoff.Jitter(p.Jitter), base, p.MaxDelay, n, prev, r)
}

// resolvedPolicy is a Policy and the same with its defaults filled in.
type resolvedPolicy struct{ src, p Policy }

// retryAfterSpread is added to a Retry-After wait so that clients told the
// same instant do not all return on the same millisecond: up to one
// ThrottleDelay (BaseDelay unless set), none with JitterNone.
func (p Policy) retryAfterSpread(r float64) time.Duration {
	if p.Jitter == JitterNone {
		return 0
	}
	return backoff.Scale(p.ThrottleDelay, r)
}

package queue

import (
	"context"
	"fmt"
	"time"

	"github.com/retryhttp/retryhttp"
	"github.com/retryhttp/retryhttp/internal/backoff"
)

// Backoff spaces the deliveries of a message that failed: the wait before
// delivery n+1 is drawn by Jitter from the ceiling min(Max, Base·2ⁿ⁻¹).
// It is what the consumer wrappers and the outbox relay take, in place of
// a retryhttp.Policy: a redelivery has no attempt timeout, body or budget,
// and its waits are seconds to minutes where an HTTP call's are
// milliseconds, so its zero value says so. Each zero field means the
// default in its comment.
type Backoff struct {
	Base   time.Duration    // the first ceiling; 0 means 1 s
	Max    time.Duration    // the largest wait; 0 means 1 min
	Jitter retryhttp.Jitter // how a wait is drawn from its ceiling; the zero value is JitterFull
}

// Defaults of a zero Backoff field.
const (
	defaultBase = time.Second
	defaultMax  = time.Minute
)

// Validate reports a negative duration, a Max below Base or an unknown
// Jitter.
func (b Backoff) Validate() error {
	switch {
	case b.Base < 0:
		return fmt.Errorf("backoff: Base %v is negative", b.Base)
	case b.Max < 0:
		return fmt.Errorf("backoff: Max %v is negative", b.Max)
	case b.resolved().Max < b.resolved().Base:
		return fmt.Errorf("backoff: Max %v is below Base %v (a zero Max is 1 min)", b.resolved().Max, b.resolved().Base)
	case b.Jitter < retryhttp.JitterFull || b.Jitter > retryhttp.JitterNone:
		return fmt.Errorf("backoff: unknown %v", b.Jitter)
	}
	return nil
}

// resolved fills the zero fields with their defaults.
func (b Backoff) resolved() Backoff {
	if b.Base == 0 {
		b.Base = defaultBase
	}
	if b.Max == 0 {
		b.Max = defaultMax
	}
	return b
}

// Wait returns the wait after failed delivery n (1 for the first), for a
// uniform random number r in [0, 1). JitterDecorrelated, which draws
// from the previous wait, takes the previous delivery's ceiling for it: a
// redelivery does not know the wait drawn before it.
func (b Backoff) Wait(n int, r float64) time.Duration {
	b = b.resolved()
	i := max(n, 1) - 1
	prev := time.Duration(0)
	if i > 0 {
		prev = backoff.Ceiling(b.Base, b.Max, i-1)
	}
	return backoff.Delay(backoff.Jitter(b.Jitter), b.Base, b.Max, i, prev, r)
}

// MaxWait is the largest wait Wait returns: Max, or its default.
func (b Backoff) MaxWait() time.Duration { return b.resolved().Max }

// Sleep waits d, or until ctx ends, and reports whether the whole wait
// passed: how the consumer wrappers wait out a backoff in the handler's
// goroutine without outliving their context.
func Sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

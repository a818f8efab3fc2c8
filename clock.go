package retryhttp

import (
	"context"
	"time"
)

// monoBase anchors mono.
var monoBase = time.Now()

// mono reads the monotonic clock alone: the time since the process
// started. It costs one clock read where time.Now costs two (wall and
// monotonic), and the retry loop measures only intervals.
func mono() time.Duration { return time.Since(monoBase) }

// clockNow is the time now as the Breaker, the Throttle and the hedging
// latencies read it: monoBase moved on by mono, one monotonic clock read
// where time.Now also reads the wall clock (80 ns of a 1 µs RoundTrip on
// a virtual machine whose wall clock is slow to read). It compares with
// time.Now's readings by their monotonic clocks, and its wall time drifts
// only if the system clock is stepped.
func clockNow() time.Time { return monoBase.Add(mono()) }

// onceClock reads clockNow at most once, when first asked.
type onceClock struct {
	t    time.Time
	read bool
}

func (c *onceClock) now() time.Time {
	if !c.read {
		c.t, c.read = clockNow(), true
	}
	return c.t
}

// sleep waits d or until ctx is done, whichever comes first, and then
// returns context.Cause(ctx). A context that can never be done (no
// deadline, no cancel: context.Background's) waits in time.Sleep, on the
// goroutine's own timer, with nothing to allocate. Otherwise the timer is
// new each time: a pooled one would cross synctest bubbles, in the tests
// of the programs that use the Transport, and those fail at once on a
// timer from another bubble.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return context.Cause(ctx)
	}
	if ctx.Done() == nil {
		time.Sleep(d)
		return nil
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-timer.C:
		return nil
	}
}

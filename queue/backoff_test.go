package queue_test

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/retryhttp/retryhttp"
	"github.com/retryhttp/retryhttp/queue"
)

func TestBackoffWait(t *testing.T) {
	for _, c := range []struct {
		name string
		b    queue.Backoff
		n    int
		r    float64
		want time.Duration
	}{
		{"zero value, first wait, top of its range", queue.Backoff{}, 1, 0.999999999, time.Second - 1},
		{"zero value, full jitter halves", queue.Backoff{}, 3, 0.5, 2 * time.Second},
		{"zero value capped at 1 min", queue.Backoff{}, 30, 0.999999999, time.Minute - 60},
		{"no jitter doubles", queue.Backoff{Base: 10 * time.Millisecond, Max: time.Second, Jitter: retryhttp.JitterNone}, 4, 0.3, 80 * time.Millisecond},
		{"no jitter capped", queue.Backoff{Base: 10 * time.Millisecond, Max: 50 * time.Millisecond, Jitter: retryhttp.JitterNone}, 9, 0, 50 * time.Millisecond},
		{"n below 1 is the first", queue.Backoff{Base: 10 * time.Millisecond, Jitter: retryhttp.JitterNone}, 0, 0, 10 * time.Millisecond},
		{"equal jitter keeps half", queue.Backoff{Base: 100 * time.Millisecond, Jitter: retryhttp.JitterEqual}, 1, 0, 50 * time.Millisecond},
		{"decorrelated from the previous ceiling", queue.Backoff{Base: 100 * time.Millisecond, Max: time.Hour, Jitter: retryhttp.JitterDecorrelated}, 3, 0.999999999, 600 * time.Millisecond},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := c.b.Wait(c.n, c.r)
			if d := got - c.want; d < -time.Microsecond || d > time.Microsecond {
				t.Errorf("Wait(%d, %v) = %v, want %v", c.n, c.r, got, c.want)
			}
		})
	}
	if got := (queue.Backoff{}).MaxWait(); got != time.Minute {
		t.Errorf("MaxWait of the zero Backoff = %v, want 1m", got)
	}
}

func TestBackoffValidate(t *testing.T) {
	if err := (queue.Backoff{}).Validate(); err != nil {
		t.Fatalf("zero Backoff: %v", err)
	}
	for _, c := range []struct {
		b    queue.Backoff
		want string
	}{
		{queue.Backoff{Base: -1}, "Base -1ns is negative"},
		{queue.Backoff{Max: -1}, "Max -1ns is negative"},
		{queue.Backoff{Base: 2 * time.Minute}, "Max 1m0s is below Base 2m0s"},
		{queue.Backoff{Base: time.Second, Max: time.Millisecond}, "Max 1ms is below Base 1s"},
		{queue.Backoff{Jitter: retryhttp.Jitter(9)}, "unknown"},
	} {
		if err := c.b.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want an error with %q", c.b, err, c.want)
		}
	}
}

// Sleep waits its whole duration unless the context ends first, and says
// which.
func TestSleep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		if !queue.Sleep(context.Background(), time.Minute) || time.Since(start) != time.Minute {
			t.Fatalf("Sleep of a minute: returned after %v", time.Since(start))
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		start = time.Now()
		if queue.Sleep(ctx, time.Minute) || time.Since(start) != time.Second {
			t.Fatalf("Sleep of a minute under a 1 s context: returned true or after %v", time.Since(start))
		}
	})
}

// Package pause is a wait helper in a package of its own, as a
// codebase's internal/backoff is.
package pause

import (
	"context"
	"time"
)

// For waits before attempt's retry, or until ctx is done.
func For(ctx context.Context, attempt int) { // want For:"waits"
	t := time.NewTimer(time.Duration(attempt) * 100 * time.Millisecond)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// Package retrier is a retry helper in a package of its own, as a
// codebase's internal/retry is.
package retrier

import (
	"context"
	"time"
)

// Do calls op until it succeeds, n times at most, waiting between calls.
func Do(ctx context.Context, n int, op func(context.Context) error) error { // want Do:"retries its parameter 2" Do:"waits"
	var err error
	for i := range n {
		if err = op(ctx); err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Duration(i+1) * 100 * time.Millisecond):
		}
	}
	return err
}

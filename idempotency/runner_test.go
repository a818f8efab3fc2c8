package idempotency

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A key whose job still runs: a second Do waits at most MaxWait, then gets
// ErrInFlight; a caller whose context ends first gets its cause; once the
// job is done, its result.
func TestRunnerWhileInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, err := NewRunner(RunnerOptions{Store: mem(t), MaxWait: time.Second, Logger: quiet})
		require.NoError(t, err)
		release := make(chan struct{})
		done := make(chan struct{})
		go func() {
			defer close(done)
			out, replayed, err := r.Do(t.Context(), "job-1", func(context.Context) ([]byte, error) {
				<-release
				return []byte("ok"), nil
			})
			assert.NoError(t, err)
			assert.False(t, replayed)
			assert.Equal(t, "ok", string(out))
		}()
		synctest.Wait()

		start := time.Now()
		_, _, err = r.Do(t.Context(), "job-1", func(context.Context) ([]byte, error) {
			t.Error("ran a second time")
			return nil, nil
		})
		assert.ErrorIs(t, err, ErrInFlight)
		assert.LessOrEqual(t, time.Since(start), time.Second, "no longer than MaxWait")

		stop := errors.New("shutting down")
		ctx, cancel := context.WithCancelCause(t.Context())
		time.AfterFunc(100*time.Millisecond, func() { cancel(stop) })
		_, _, err = r.Do(ctx, "job-1", func(context.Context) ([]byte, error) { return nil, nil })
		assert.ErrorIs(t, err, stop, "the caller's cause, not ErrInFlight")

		close(release)
		<-done
		out, replayed, err := r.Do(t.Context(), "job-1", func(context.Context) ([]byte, error) { return nil, nil })
		require.NoError(t, err)
		assert.True(t, replayed)
		assert.Equal(t, "ok", string(out))
	})
}

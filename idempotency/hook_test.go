package idempotency

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type recorded struct {
	mu     sync.Mutex
	events []Event
}

// hook is a HookFunc that records each event.
func (r *recorded) hook() Hook {
	return HookFunc(func(_ context.Context, e Event) {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.events = append(r.events, e)
	})
}

func (r *recorded) results() []Result {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Result
	for _, e := range r.events {
		if e.Kind == EventResult {
			out = append(out, e.Result)
		}
	}
	return out
}

// The middleware tells its hooks each request's result, as its metrics
// count it; *Metrics is a Hook that counts the same.
func TestMiddlewareHooks(t *testing.T) {
	var h recorded
	reg := prometheus.NewRegistry()
	asHook, err := NewMetrics(reg)
	require.NoError(t, err)
	var c counter
	m := newMiddleware(t, Options{Hooks: []Hook{h.hook(), asHook}})
	handler := m.Handler(c.handler(201))
	call(handler, "POST", "k", `{}`, nil)
	call(handler, "POST", "k", `{}`, nil)
	call(handler, "POST", "k", `{"other":1}`, nil)
	assert.Equal(t, []Result{ResultNew, ResultReplayed, ResultMismatch}, h.results())
	assert.Equal(t, "POST", h.events[0].Method)
	assert.Equal(t, "/charges", h.events[0].Path)
	assert.Equal(t, 1.0, testutil.ToFloat64(asHook.requests.WithLabelValues(ResultReplayed.String())))
}

// The Runner tells its hooks each Do's result and a lapsed claim.
func TestRunnerHooks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var h recorded
		s := &stalledStore{Store: mem(t)}
		r, err := NewRunner(RunnerOptions{Store: s, Kind: "payments", LockTimeout: 3 * time.Second, Logger: quiet, Hooks: []Hook{h.hook()}})
		require.NoError(t, err)
		ctx := context.Background()
		_, _, err = r.Do(ctx, "a", func(context.Context) ([]byte, error) { return []byte("ok"), nil })
		require.NoError(t, err)
		_, replayed, _ := r.Do(ctx, "a", func(context.Context) ([]byte, error) { return nil, nil })
		assert.True(t, replayed)
		_, _, err = r.Do(ctx, "b", func(context.Context) ([]byte, error) { return nil, errors.New("declined") })
		require.Error(t, err)
		_, _, err = r.Do(ctx, "c", func(ctx context.Context) ([]byte, error) {
			s.stalled.Store(true)
			<-ctx.Done()
			return nil, context.Cause(ctx)
		})
		require.ErrorIs(t, err, ErrClaimLapsed)
		time.Sleep(2 * storeDeadline)
		assert.Equal(t, []Result{ResultNew, ResultReplayed, ResultReleased, ResultReleased}, h.results())
		var lapsed int
		for _, e := range h.events {
			if e.Kind == EventClaimLapsed {
				lapsed++
				assert.ErrorIs(t, e.Err, ErrClaimLapsed)
			}
			if e.Kind == EventResult {
				assert.Equal(t, "payments", e.RunnerKind)
			}
		}
		assert.Equal(t, 1, lapsed)
	})
}

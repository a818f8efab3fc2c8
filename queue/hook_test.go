package queue

import (
	"context"
	"testing"
)

// A HookFunc is a Hook that calls its function with the context and the
// event it is given.
func TestHookFunc(t *testing.T) {
	type event struct{ n int }
	type key struct{}
	var got []int
	var h Hook[event] = HookFunc[event](func(ctx context.Context, e event) {
		if ctx.Value(key{}) != "v" {
			t.Error("the hook was not given the caller's context")
		}
		got = append(got, e.n)
	})
	ctx := context.WithValue(context.Background(), key{}, "v")
	h.OnEvent(ctx, event{1})
	h.OnEvent(ctx, event{2})
	if len(got) != 2 || got[0] != 1 || got[1] != 2 {
		t.Fatalf("events = %v, want [1 2]", got)
	}
}

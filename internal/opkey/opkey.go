// Package opkey carries the identity of a logical operation (an inbound
// request with an Idempotency-Key, a job, a message) in a context, so that
// every retry layer below derives the same keys for the calls it makes.
// package idempotency puts one there; retryhttp reads it.
package opkey

import (
	"context"
	"sync"
)

// Op is one logical operation.
type Op struct {
	// ID identifies the operation, scoped to its caller (for a request, the
	// hash of scope and key that the store keys by).
	ID string
	// Key and Scope are the inbound key and the caller's scope, when the
	// operation is an HTTP request with a key.
	Key, Scope string

	mu    sync.Mutex
	calls map[string]int // calls made so far, by target
}

type ctxKey struct{}

// With returns ctx carrying op.
func With(ctx context.Context, op *Op) context.Context { return context.WithValue(ctx, ctxKey{}, op) }

// From returns the operation in ctx, or nil.
func From(ctx context.Context) *Op {
	op, _ := ctx.Value(ctxKey{}).(*Op)
	return op
}

// Next numbers the calls to target within the operation: 1 for the first,
// 2 for the second. A handler that runs again (a retry of the inbound
// request) counts from 1 again, so the n-th call to a target gets the same
// derived key on every run.
func (o *Op) Next(target string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.calls == nil {
		o.calls = map[string]int{}
	}
	o.calls[target]++
	return o.calls[target]
}

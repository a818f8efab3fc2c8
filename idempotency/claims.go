package idempotency

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"
)

// claims is what the middleware and the Runner share: running a piece of
// work under a claim on a Store, keeping the claim alive while it runs, and
// recording or releasing it afterwards in a way that survives the store's
// transient errors.
type claims struct {
	store  Store
	lock   time.Duration
	logger *slog.Logger
}

// Store operations after the work ran are retried: a pooled connection
// that died in a failover, a reply lost in a network blip must not leave a
// key locked or unrecorded. storeAttempts and storeDeadline bound it.
const (
	storeAttempts = 6
	storeDeadline = 5 * time.Second
	storeTryLimit = 2 * time.Second // one try's bound, so a hung connection does not hold the rest
)

// retryStore runs op until it succeeds, returns ErrNotOwner, or
// storeAttempts tries or storeDeadline have passed, waiting 10, 20, 40 ...
// ms between tries. Each try has its own time limit and, with a pool, is
// likely to run on another connection than the one that failed.
func (c *claims) retryStore(ctx context.Context, op func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), storeDeadline)
	defer cancel()
	var err error
	wait := 10 * time.Millisecond
	for range storeAttempts {
		tctx, tcancel := context.WithTimeout(ctx, storeTryLimit)
		err = op(tctx)
		tcancel()
		if err == nil || errors.Is(err, ErrNotOwner) || ctx.Err() != nil {
			return err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
		wait *= 2
	}
	return err
}

// release frees owner's claim, retrying as retryStore does. A failure is
// logged: the claim frees itself after the lock.
func (c *claims) release(ctx context.Context, key, owner string, attrs ...slog.Attr) {
	err := c.retryStore(ctx, func(ctx context.Context) error { return c.store.Release(ctx, key, owner) })
	if err != nil {
		c.log(ctx, slog.LevelError, "idempotency: store release failed; the key is held until LockTimeout", err, attrs...)
	}
}

// complete records resp as owner's result, retrying as retryStore does.
func (c *claims) complete(ctx context.Context, key, owner string, resp *Response, retention time.Duration) error {
	return c.retryStore(ctx, func(ctx context.Context) error {
		return c.store.Complete(ctx, key, owner, resp, retention)
	})
}

func (c *claims) log(ctx context.Context, level slog.Level, msg string, err error, attrs ...slog.Attr) {
	if errors.Is(err, context.Canceled) && ctx.Err() != nil {
		return // the caller went away; nothing to report
	}
	c.logger.LogAttrs(ctx, level, msg, append(attrs, slog.String("error", err.Error()))...)
}

// claimKeeper extends a claim every lock/3 while its work runs. It starts
// no goroutine until the first extension is due, so work faster than that
// costs one timer.
type claimKeeper struct {
	c          *claims
	ctx        context.Context
	key, owner string
	lost       context.CancelCauseFunc
	attrs      []slog.Attr

	mu      sync.Mutex
	timer   *time.Timer // guarded by mu
	stopped bool        // guarded by mu
}

// keep starts extending owner's claim; lost is called, with ErrNotOwner,
// if another owner turns out to hold the key.
func (c *claims) keep(ctx context.Context, key, owner string, lost context.CancelCauseFunc, attrs ...slog.Attr) *claimKeeper {
	k := &claimKeeper{c: c, ctx: context.WithoutCancel(ctx), key: key, owner: owner, lost: lost, attrs: attrs}
	k.mu.Lock()
	k.timer = time.AfterFunc(c.lock/3, k.extend)
	k.mu.Unlock()
	return k
}

func (k *claimKeeper) extend() {
	lock := k.c.lock
	ctx, cancel := context.WithTimeout(k.ctx, lock/3)
	err := k.c.store.Extend(ctx, k.key, k.owner, lock)
	cancel()
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.stopped {
		return
	}
	switch {
	case errors.Is(err, ErrNotOwner):
		// Another request holds the key now: tell the work to stop.
		k.c.log(k.ctx, slog.LevelError, "idempotency: claim lost while the work ran; its context is cancelled", err, k.attrs...)
		k.lost(err)
		return
	case err != nil:
		// Try again sooner: the claim still has two thirds of its time.
		k.c.log(k.ctx, slog.LevelWarn, "idempotency: store extend failed", err, k.attrs...)
		k.timer.Reset(lock / 6)
		return
	}
	k.timer.Reset(lock / 3)
}

// stop ends the extensions; an extension under way finishes but changes
// nothing.
func (k *claimKeeper) stop() {
	k.mu.Lock()
	k.stopped = true
	k.timer.Stop()
	k.mu.Unlock()
}

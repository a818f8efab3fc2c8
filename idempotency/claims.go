package idempotency

import (
	"context"
	"errors"
	"fmt"
	"github.com/retryhttp/retryhttp/internal/opkey"
	"log/slog"
	"time"
)

// claims is what the middleware and the Runner share: running a piece of
// work under a claim on a Store, keeping the claim alive while it runs, and
// recording or releasing it afterwards in a way that survives the store's
// transient errors.
type claims struct {
	store   Store
	lock    time.Duration
	timeout time.Duration // one store call's bound (StoreTimeout)
	logger  *slog.Logger
	hooks   []Hook       // told of lapses; the Middleware and the Runner tell them of results
	cache   *replayCache // completed records in memory; nil: none
}

// claimTimes checks and completes the times a Middleware and a Runner
// share: zero means the default, a negative is an error, Retention must
// exceed LockTimeout, and a store call must be able to end well within a
// claim's lock (StoreTimeout at most LockTimeout/3, the extension period).
func claimTimes(retention, lock, maxWait, timeout *time.Duration) error {
	switch {
	case *retention < 0:
		return fmt.Errorf("idempotency: Retention %v is negative", *retention)
	case *lock < 0:
		return fmt.Errorf("idempotency: LockTimeout %v is negative", *lock)
	case *maxWait < 0:
		return fmt.Errorf("idempotency: MaxWait %v is negative", *maxWait)
	case *timeout < 0:
		return fmt.Errorf("idempotency: StoreTimeout %v is negative", *timeout)
	}
	explicit := *timeout != 0
	if *retention == 0 {
		*retention = DefaultRetention
	}
	if *lock == 0 {
		*lock = DefaultLockTimeout
	}
	if *maxWait == 0 {
		*maxWait = *lock
	}
	if *retention <= *lock {
		return fmt.Errorf("idempotency: Retention %v must exceed LockTimeout %v: a stored result must outlive any claim, or a retry runs the work again", *retention, *lock)
	}
	if !explicit {
		*timeout = min(DefaultStoreTimeout, *lock/3)
	}
	if *timeout > *lock/3 {
		return fmt.Errorf("idempotency: StoreTimeout %v must be at most LockTimeout/3 (%v): an extension must be able to fail and be tried again before the claim lapses", *timeout, *lock/3)
	}
	return nil
}

// DefaultStoreTimeout bounds one store call when StoreTimeout is 0 (or
// LockTimeout/3, if that is shorter): a stalled store answers 503 within
// it, before the handler runs.
const DefaultStoreTimeout = 2 * time.Second

func newClaims(store Store, lock, timeout time.Duration, logger *slog.Logger, hooks []Hook) claims {
	return claims{store: store, lock: lock, timeout: timeout, logger: logger, hooks: hooks}
}

// emit tells the hooks of e.
func (c *claims) emit(ctx context.Context, e Event) {
	for _, h := range c.hooks {
		h.OnEvent(ctx, e)
	}
}

// Store operations after the work ran are retried: a pooled connection
// that died in a failover, a reply lost in a network blip must not leave a
// key locked or unrecorded. storeAttempts and storeDeadline bound it; each
// try is bounded by StoreTimeout, so a hung connection does not hold the
// rest.
const (
	storeAttempts = 6
	storeDeadline = 5 * time.Second
)

// retryStore runs op until it succeeds, returns ErrNotOwner, or
// storeAttempts tries or storeDeadline have passed, waiting 10, 20, 40 ...
// ms between tries. Each try has its own time limit (StoreTimeout) and,
// with a pool, is likely to run on another connection than the one that
// failed. ctx's cancellation is ignored: what is being recorded already
// happened.
func (c *claims) retryStore(ctx context.Context, op func(context.Context) error) error {
	if ctx.Done() != nil {
		ctx = context.WithoutCancel(ctx)
	}
	var deadline time.Time // set at the first failure
	var err error
	wait := 10 * time.Millisecond
	for range storeAttempts {
		end := time.Now().Add(c.timeout)
		if !deadline.IsZero() && deadline.Before(end) {
			end = deadline
		}
		tctx, cancel := context.WithDeadline(ctx, end)
		err = op(tctx)
		cancel()
		if err == nil || errors.Is(err, ErrNotOwner) {
			return err
		}
		if deadline.IsZero() {
			deadline = time.Now().Add(storeDeadline)
		}
		if time.Until(deadline) <= wait {
			return err
		}
		time.Sleep(wait)
		wait *= 2
	}
	return err
}

// claim asks the store for key on behalf of a new owner, whose token it
// returns, until the key is the owner's (a nil record) or a record answers
// the request: a completed one, one of
// another fingerprint, or one still in flight when waiting ends (at once
// unless wait; otherwise after maxWait, or when ctx ends: the caller tells
// these apart by ctx.Err()). Each Claim is bounded by StoreTimeout. An
// error is the store's; the claim is then released in the background (it
// may have been taken with its reply lost, which would leave the key
// locked with nothing running), once and within StoreTimeout, so the error
// is answered at once.
//
// sent is when the successful Claim was sent: the claim holds until at
// least sent + lock, on this process's monotonic clock.
func (c *claims) claim(ctx context.Context, key, fp string, wait bool, maxWait time.Duration, attrs ...slog.Attr) (rec *Record, owner string, sent time.Time, err error) {
	if c.cache != nil { // no clock read on the way to the store without one
		if rec := c.cache.get(key, time.Now()); rec != nil {
			return rec, "", time.Time{}, nil // a replay from memory needs no owner
		}
	}
	owner = newOwner()
	var until time.Time // set when the first wait begins
	for pause := 25 * time.Millisecond; ; pause = min(2*pause, time.Second) {
		sent = time.Now()
		tctx, cancel := context.WithDeadline(ctx, sent.Add(c.timeout))
		rec, err := c.store.Claim(tctx, ClaimParams{Key: key, Fingerprint: fp, Owner: owner, Lock: c.lock})
		cancel()
		if err != nil {
			go c.releaseLost(context.WithoutCancel(ctx), key, owner, attrs...)
			return nil, owner, sent, err
		}
		if c.cache != nil && rec != nil && rec.Response != nil && !rec.Expires.IsZero() {
			c.cache.put(key, *rec, time.Now())
		}
		if rec == nil || rec.Fingerprint != fp || rec.Response != nil || !wait {
			return rec, owner, sent, nil
		}
		now := time.Now()
		if until.IsZero() {
			until = now.Add(maxWait)
		}
		if now.Add(pause).After(until) {
			return rec, owner, sent, nil
		}
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return rec, owner, sent, nil
		case <-t.C:
		}
	}
}

// remember caches the response just stored under key for fp, claimed at
// sent: its record expires retention after its completion, so no earlier
// than sent + retention.
func (c *claims) remember(key, fp string, resp *Response, sent time.Time, retention time.Duration) {
	if c.cache != nil && resp != nil {
		c.cache.put(key, Record{Fingerprint: fp, Response: resp, Expires: sent.Add(retention)}, time.Now())
	}
}

// release frees owner's claim, retrying as retryStore does. A failure is
// logged: the claim frees itself after the lock.
func (c *claims) release(ctx context.Context, key, owner string, attrs ...slog.Attr) {
	err := c.retryStore(ctx, func(ctx context.Context) error { return c.store.Release(ctx, ReleaseParams{Key: key, Owner: owner}) })
	if err != nil {
		c.log(ctx, slog.LevelError, "idempotency: store release failed; the key is held until LockTimeout", err, attrs...)
	}
}

// Where run stopped when it did not store a result: the store call that
// failed ("" when the work itself chose not to store).
const (
	stageBegin    = "begin"
	stageCommit   = "commit"
	stageComplete = "complete"
)

// run is the one claim-run-commit skeleton of the middleware and the
// Runner: it runs work under owner's claim on op (sent at sent), keeping
// the claim alive meanwhile with k, in a transaction of txs when it is not
// nil, and then stores the result work returns, or, when work says not to
// store it (a failure, a retryable status) or panics, undoes the attempt
// so that a retry runs the work again: the transaction's writes, then the
// claim. A panic goes on after that.
//
// released reports that the claim was given up; stage and err name a
// store call that failed: begin or commit (released), or complete (the
// effect happened and cannot be undone: the claim is kept, and expires
// after the lock). Store calls after the work use a context that outlives
// ctx: what happened must be recorded even if the caller went away.
func (c *claims) run(ctx context.Context, k *claimKeeper, op *opkey.Op, owner string, sent time.Time, txs TxStore, retention time.Duration,
	work func(ctx context.Context) (resp *Response, store bool), attrs ...slog.Attr) (released bool, stage string, err error) {
	key := op.ID
	bg := context.WithoutCancel(ctx)
	wctx, cancel := context.WithCancelCause(opkey.With(ctx, op))
	defer cancel(nil)
	k.start(c, bg, key, owner, sent, cancel, attrs...)
	var tx Tx
	abandon := func() {
		k.stop()
		if tx != nil {
			tx.Rollback(bg)
		}
		c.release(bg, key, owner, attrs...)
	}
	if txs != nil {
		if tx, wctx, err = txs.Begin(wctx, BeginParams{Key: key, Owner: owner}); err != nil {
			abandon()
			return true, stageBegin, err
		}
	}
	finished := false
	defer func() {
		if !finished { // work panicked: undo, then let the panic go on
			abandon()
		}
	}()
	resp, store := work(wctx)
	finished = true
	if !store {
		abandon()
		return true, "", nil
	}
	k.stop()
	if tx != nil {
		if err := tx.Commit(bg, resp, retention); err != nil {
			// Rolled back, or (a lost reply to COMMIT) committed: releasing
			// frees the key in the first case and, since Release leaves a
			// completed record alone, does nothing in the second.
			abandon()
			return true, stageCommit, err
		}
		return false, "", nil
	}
	if err := c.complete(bg, key, owner, resp, retention); err != nil {
		return false, stageComplete, err
	}
	return false, "", nil
}

// releaseLost frees a claim that may have been taken with its reply lost:
// one try, within StoreTimeout, since the claim frees itself after the
// lock anyway and the request that made it has been answered already.
func (c *claims) releaseLost(ctx context.Context, key, owner string, attrs ...slog.Attr) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	if err := c.store.Release(ctx, ReleaseParams{Key: key, Owner: owner}); err != nil {
		c.log(ctx, slog.LevelWarn, "idempotency: store release after a failed claim failed; the key may be held until LockTimeout", err, attrs...)
	}
}

// complete records resp as owner's result, retrying as retryStore does.
func (c *claims) complete(ctx context.Context, key, owner string, resp *Response, retention time.Duration) error {
	return c.retryStore(ctx, func(ctx context.Context) error {
		return c.store.Complete(ctx, CompleteParams{Key: key, Owner: owner, Response: resp, Retention: retention})
	})
}

func (c *claims) log(ctx context.Context, level slog.Level, msg string, err error, attrs ...slog.Attr) {
	if errors.Is(err, context.Canceled) && ctx.Err() != nil {
		return // the caller went away; nothing to report
	}
	c.logger.LogAttrs(ctx, level, msg, append(attrs, slog.String("error", err.Error()))...)
}

package idempotency

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"
)

// claimKeeper keeps one claim alive while its work runs: a timer extends
// it every LockTimeout/3 and, when the extensions stop succeeding (the
// store partitioned away, stalled or failing), tells the work to stop
// before the claim can lapse.
//
// A claim is known held until the send of its last successful claim or
// extension plus LockTimeout, on this process's monotonic clock (the
// store's clock started counting after that send). Once less than
// lapseMargin of that is left, the work is cancelled with ErrClaimLapsed,
// whether the store answered ErrNotOwner or nothing at all: a partitioned
// process hears nothing, and by then another request may take the key.
type claimKeeper struct {
	c          *claims
	ctx        context.Context // not cancelled with the work's: an extension outlives a hang-up
	key, owner string
	lost       context.CancelCauseFunc
	attrs      []slog.Attr

	mu        sync.Mutex
	timer     *time.Timer
	held      time.Time // the claim is known held until then
	working   bool      // the work runs: keep the claim
	extending bool      // an extension is under way
	lapsed    bool      // the work was told that the claim lapsed
}

// lapseMargin is how long before a claim could lapse its work is told to
// stop: time for the work to notice, and for the store's clock to run
// faster than this process's.
func (c *claims) lapseMargin() time.Duration { return c.lock / 6 }

// start begins keeping owner's claim, sent (taken) at sent; lost is
// called with ErrNotOwner if another owner turns out to hold the key, and
// with ErrClaimLapsed if the claim cannot be shown to be held any longer.
// k is filled in place, so a caller can keep it in a larger per-request
// allocation.
func (k *claimKeeper) start(c *claims, ctx context.Context, key, owner string, sent time.Time, lost context.CancelCauseFunc, attrs ...slog.Attr) {
	k.c, k.ctx, k.key, k.owner, k.lost, k.attrs = c, ctx, key, owner, lost, attrs
	k.mu.Lock()
	k.held, k.working, k.extending, k.lapsed = sent.Add(c.lock), true, false, false
	k.timer = time.AfterFunc(c.lock/3, k.fire)
	k.mu.Unlock()
}

// stop ends the extensions; an extension under way finishes but changes
// nothing.
func (k *claimKeeper) stop() {
	k.mu.Lock()
	k.working = false
	k.timer.Stop()
	k.mu.Unlock()
}

// fire is the timer's: it stops the work if its claim may lapse, and
// otherwise extends the claim, unless an extension is under way already.
// Either way the timer is set to fire again when the claim could lapse,
// should the extension hang.
func (k *claimKeeper) fire() {
	k.mu.Lock()
	if !k.working || k.lapsed {
		k.mu.Unlock()
		return
	}
	left := time.Until(k.held) - k.c.lapseMargin()
	if left <= 0 {
		k.lapsed = true
		k.mu.Unlock()
		k.c.log(k.ctx, slog.LevelError, "idempotency: claim could not be extended before it could lapse; the work's context is cancelled", ErrClaimLapsed, k.attrs...)
		k.tell(ErrClaimLapsed)
		return
	}
	k.timer.Reset(left)
	if k.extending {
		k.mu.Unlock()
		return
	}
	k.extending = true
	k.mu.Unlock()
	k.extend()
}

// extend moves the claim's expiry to LockTimeout from now and sets the
// next extension: LockTimeout/3 after a success, half that after an
// error, none after ErrNotOwner, when the work is told to stop.
func (k *claimKeeper) extend() {
	c := k.c
	sent := time.Now()
	ctx, cancel := context.WithDeadline(k.ctx, sent.Add(c.timeout))
	err := c.store.Extend(ctx, ExtendParams{Key: k.key, Owner: k.owner, Lock: c.lock})
	cancel()
	k.mu.Lock()
	k.extending = false
	if !k.working || k.lapsed {
		k.mu.Unlock()
		return
	}
	next := c.lock / 6
	switch {
	case errors.Is(err, ErrNotOwner):
		// Another request holds the key now: tell the work to stop.
		k.lapsed = true
		k.timer.Stop()
		k.mu.Unlock()
		c.log(k.ctx, slog.LevelError, "idempotency: claim lost while the work ran; its context is cancelled", err, k.attrs...)
		k.tell(err)
		return
	case err == nil:
		k.held = sent.Add(c.lock)
		next = c.lock / 3
	}
	k.timer.Reset(min(next, time.Until(k.held)-c.lapseMargin()))
	k.mu.Unlock()
	if err != nil {
		c.log(k.ctx, slog.LevelWarn, "idempotency: store extend failed", err, k.attrs...)
	}
}

// tell the hooks and the work that k's claim lapsed with err.
func (k *claimKeeper) tell(err error) {
	e := Event{Kind: EventClaimLapsed, Err: err}
	for _, a := range k.attrs { // the request's method and path
		switch a.Key {
		case "method":
			e.Method = a.Value.String()
		case "path":
			e.Path = a.Value.String()
		}
	}
	k.c.emit(k.ctx, e)
	k.lost(err)
}

package idempotency

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"
)

// watch keeps the claims in flight alive, and bounds the store calls made
// after their work, with one timer for a Middleware (or a Runner) instead
// of one per request. A timer per claim and a context with a deadline per
// store call cost 1.2 µs of the 7 µs the middleware's own work took
// (BenchmarkMiddlewareOwnCost); a watch costs a few uncontended locks.
//
// Time is counted in ticks of one period. Something registered between
// two ticks and due d ticks later is handled between d-1 and d periods
// after it was registered; the counts below are chosen for that.
type watch struct {
	period      time.Duration
	extendTicks uint64 // a claim is extended every extendTicks ticks
	tryTicks    uint64 // a store call is cancelled after tryTicks ticks

	mu    sync.Mutex
	tick  uint64
	head  *claimKeeper // what is watched, linked through the keepers
	armed bool         // the timer will fire
	timer *time.Timer
}

// never is a due tick that does not come.
const never = ^uint64(0)

// newWatch sizes the period so that a claim of lock is extended at least
// every lock/3, as it always was, and a store call is cancelled between
// timeout and 1.5 timeout.
func newWatch(lock, timeout time.Duration) *watch {
	p := max(min(lock/6, timeout/2), 1)
	return &watch{
		period:      p,
		extendTicks: max(2, uint64(lock/3/p)),
		tryTicks:    uint64((timeout+p-1)/p) + 1,
	}
}

// claimKeeper is one claim's entry in the watch: while its work runs, the
// claim is extended; while a store call runs after the work, the call is
// bounded. Everything below c is guarded by the watch's mutex.
type claimKeeper struct {
	c          *claims
	ctx        context.Context // not cancelled with the work's: an extension outlives a hang-up
	key, owner string
	lost       context.CancelCauseFunc
	attrs      []slog.Attr

	prev, next *claimKeeper
	listed     bool
	due        uint64
	working    bool               // the work runs: extend the claim when due
	extending  bool               // an extension is under way
	cancelTry  context.CancelFunc // a store call runs: cancel it when due
	held       time.Time          // the claim is known held until then: the last successful claim or extension's send, plus lock
	lapsed     bool               // the work was told that the claim lapsed
}

// start begins extending owner's claim, sent (taken) at sent; lost is
// called with ErrNotOwner if another owner turns out to hold the key, and
// with ErrClaimLapsed if the claim cannot be shown to be held any longer.
// k is filled in place, so a caller can keep it in a larger per-request
// allocation.
func (k *claimKeeper) start(c *claims, ctx context.Context, key, owner string, sent time.Time, lost context.CancelCauseFunc, attrs ...slog.Attr) {
	*k = claimKeeper{c: c, ctx: ctx, key: key, owner: owner, lost: lost, attrs: attrs, held: sent.Add(c.lock)}
	w := c.watch
	w.mu.Lock()
	k.working = true
	k.due = w.tick + w.extendTicks
	w.add(k)
	w.mu.Unlock()
}

// stop ends the extensions; an extension under way finishes but changes
// nothing.
func (k *claimKeeper) stop() {
	w := k.c.watch
	w.mu.Lock()
	k.working = false
	w.remove(k)
	w.mu.Unlock()
}

// bound has the watch cancel the store call k's claim is making, should
// it hang, until unbound.
func (w *watch) bound(k *claimKeeper, cancel context.CancelFunc) {
	w.mu.Lock()
	k.cancelTry = cancel
	k.due = w.tick + w.tryTicks
	w.add(k)
	w.mu.Unlock()
}

func (w *watch) unbound(k *claimKeeper) {
	w.mu.Lock()
	k.cancelTry = nil
	w.remove(k)
	w.mu.Unlock()
}

// add links k in and makes sure the timer will fire. The timer is left
// set when the list empties, and stops at its next tick: under load it is
// set once, not once per request.
func (w *watch) add(k *claimKeeper) {
	if k.listed {
		return
	}
	k.listed, k.prev, k.next = true, nil, w.head
	if w.head != nil {
		w.head.prev = k
	}
	w.head = k
	if !w.armed {
		w.armed = true
		if w.timer == nil {
			w.timer = time.AfterFunc(w.period, w.fire)
		} else {
			w.timer.Reset(w.period)
		}
	}
}

func (w *watch) remove(k *claimKeeper) {
	if !k.listed {
		return
	}
	if k.prev != nil {
		k.prev.next = k.next
	} else {
		w.head = k.next
	}
	if k.next != nil {
		k.next.prev = k.prev
	}
	k.listed, k.prev, k.next = false, nil, nil
}

// fire is one tick: it cancels the store calls that are due, starts the
// extensions that are, and stops the work whose claim may have lapsed.
//
// A claim is known held until the send of its last successful claim or
// extension plus lock, on this process's monotonic clock (the store's
// clock started counting after that send). Work still running within two
// periods of that time is cancelled with ErrClaimLapsed, whether the
// store answered ErrNotOwner or nothing at all: a partitioned process
// hears nothing, and by then another request may take the key. Ticks come
// every period, so the cancel lands between two periods and one before
// the claim can lapse.
func (w *watch) fire() {
	var extend, lapsed []*claimKeeper
	now := time.Now()
	w.mu.Lock()
	w.tick++
	for k := w.head; k != nil; k = k.next {
		if k.working && !k.lapsed && now.After(k.held.Add(-2*w.period)) {
			k.lapsed = true
			lapsed = append(lapsed, k)
		}
		if k.due > w.tick {
			continue
		}
		k.due = never
		switch {
		case k.cancelTry != nil:
			k.cancelTry()
		case k.working && !k.extending:
			k.extending = true
			extend = append(extend, k)
		}
	}
	if w.head != nil {
		w.timer.Reset(w.period)
	} else {
		w.armed = false
	}
	w.mu.Unlock()
	for _, k := range lapsed {
		k.c.log(k.ctx, slog.LevelError, "idempotency: claim could not be extended before it could lapse; the work's context is cancelled", ErrClaimLapsed, k.attrs...)
		k.c.emit(k.ctx, k.lapse(ErrClaimLapsed))
		k.lost(ErrClaimLapsed)
	}
	for _, k := range extend {
		go k.extend()
	}
}

// extend moves the claim's expiry to lock from now and schedules the next
// extension: sooner after an error, none after ErrNotOwner, when the work
// is told to stop.
func (k *claimKeeper) extend() {
	c, w := k.c, k.c.watch
	sent := time.Now()
	ctx, cancel := context.WithDeadline(k.ctx, sent.Add(c.timeout))
	err := c.store.Extend(ctx, ExtendParams{Key: k.key, Owner: k.owner, Lock: c.lock})
	cancel()
	w.mu.Lock()
	k.extending = false
	working := k.working
	switch {
	case !working, errors.Is(err, ErrNotOwner):
	case err != nil:
		k.due = w.tick + max(1, w.extendTicks/2)
	default:
		k.due = w.tick + w.extendTicks
		k.held = sent.Add(c.lock)
	}
	w.mu.Unlock()
	switch {
	case !working:
	case errors.Is(err, ErrNotOwner):
		// Another request holds the key now: tell the work to stop.
		c.log(k.ctx, slog.LevelError, "idempotency: claim lost while the work ran; its context is cancelled", err, k.attrs...)
		c.emit(k.ctx, k.lapse(err))
		k.lost(err)
	case err != nil:
		c.log(k.ctx, slog.LevelWarn, "idempotency: store extend failed", err, k.attrs...)
	}
}

// lapse is the event of k's claim lapsing with err. Its method and path
// come from the log attributes that name the request.
func (k *claimKeeper) lapse(err error) Event {
	e := Event{Kind: EventClaimLapsed, Err: err}
	for _, a := range k.attrs {
		switch a.Key {
		case "method":
			e.Method = a.Value.String()
		case "path":
			e.Path = a.Value.String()
		}
	}
	return e
}

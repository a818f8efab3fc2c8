package overload

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/retryhttp/retryhttp/internal/gradient"
)

// ErrLimited is the error of a caller refused by a [Limit]: its queue was
// full, or the caller waited Options.MaxWait without a slot freeing.
var ErrLimited = errors.New("overload: concurrency limit reached")

// Limiter keeps an adaptive limit on the calls in flight for each key (a
// Transport's key is the host): a [Limit] per key, moved by the latency of
// the calls it admits (see [Options]).
//
// The zero Limiter uses the defaults of [Options]. A Limiter is safe for
// concurrent use; share one among the Transports that call the same
// hosts, so that together they stay within each host's limit. It must not
// be copied after first use.
type Limiter struct {
	opts  Options
	once  sync.Once
	s     settings // opts with defaults resolved, set by once
	keys  sync.Map // string -> *Limit
	mu    sync.Mutex
	nkeys int // guarded by mu
}

// Options configure a Limiter. Each zero field takes the default in its
// comment, those of Gradient2 in Netflix's concurrency-limits
// (Gradient2Limit) where it has one, and of failsafe-go's adaptive limiter
// for the bounds.
type Options struct {
	// Min is the lowest the limit goes. 0 means 1.
	Min int
	// Max is the highest the limit goes. 0 means 200.
	Max int
	// Initial is the limit a key starts with, before any latency is
	// known. 0 means 20, or Min if that is more, or Max if less.
	Initial int
	// Tolerance is how far the latency may rise above its long-term
	// average before the limit shrinks: 1.5 lets it rise by half. 0 means
	// 1.5; a value below 1 is an error.
	Tolerance float64
	// Queue is how many callers of a key may wait for a slot when the
	// limit is reached; past it a caller is refused at once. 0 means none
	// wait: a caller over the limit is refused at once.
	Queue int
	// MaxWait bounds how long a caller waits in the queue before it is
	// refused. 0 means until its context ends.
	MaxWait time.Duration
	// MaxKeys bounds the keys tracked; past it, a key with nothing in
	// flight is forgotten to make room. 0 means 1024.
	MaxKeys int

	// Name is the name label of the metrics and the Name of the Events:
	// which Limiter or Shedder they are of.
	Name string
	// Hooks are told of each change of a key's limit and of each refused
	// call, in order (see Hook): *Metrics (NewMetrics) here.
	Hooks []Hook
}

// settings are Options with every default resolved.
type settings struct {
	min, max, initial float64
	tolerance         float64
	queue             int
	maxWait           time.Duration
	maxKeys           int
	name              string
	hooks             []Hook
}

// The defaults.
const (
	DefaultMin       = 1
	DefaultMax       = 200
	DefaultInitial   = 20
	DefaultTolerance = 1.5
	DefaultMaxKeys   = 1024
)

// NewLimiter returns a Limiter with the given options, or an error that
// names the first invalid one.
func NewLimiter(opts Options) (*Limiter, error) {
	if err := opts.validate("NewLimiter"); err != nil {
		return nil, err
	}
	return &Limiter{opts: opts}, nil
}

func (o Options) validate(fn string) error {
	switch {
	case o.Min < 0:
		return fmt.Errorf("overload: %s: Min %d is negative", fn, o.Min)
	case o.Max < 0:
		return fmt.Errorf("overload: %s: Max %d is negative", fn, o.Max)
	case o.Max > 0 && o.Min > o.Max:
		return fmt.Errorf("overload: %s: Min %d is above Max %d", fn, o.Min, o.Max)
	case o.Initial < 0:
		return fmt.Errorf("overload: %s: Initial %d is negative", fn, o.Initial)
	case o.Tolerance != 0 && !(o.Tolerance >= 1) || math.IsInf(o.Tolerance, 0):
		return fmt.Errorf("overload: %s: Tolerance %v must be a finite number >= 1", fn, o.Tolerance)
	case o.Queue < 0:
		return fmt.Errorf("overload: %s: Queue %d is negative", fn, o.Queue)
	case o.MaxWait < 0:
		return fmt.Errorf("overload: %s: MaxWait %v is negative", fn, o.MaxWait)
	case o.MaxKeys < 0:
		return fmt.Errorf("overload: %s: MaxKeys %d is negative", fn, o.MaxKeys)
	}
	return nil
}

func (o Options) resolve() settings {
	s := settings{min: DefaultMin, max: DefaultMax, tolerance: DefaultTolerance, queue: o.Queue, maxWait: o.MaxWait, maxKeys: DefaultMaxKeys,
		name: o.Name, hooks: o.Hooks}
	if o.Min > 0 {
		s.min = float64(o.Min)
	}
	if o.Max > 0 {
		s.max = float64(o.Max)
	}
	s.max = max(s.max, s.min) // a zero Max under a Min above 200
	s.initial = DefaultInitial
	if o.Initial > 0 {
		s.initial = float64(o.Initial)
	}
	s.initial = gradient.Clamp(s.initial, s.min, s.max)
	if o.Tolerance != 0 {
		s.tolerance = o.Tolerance
	}
	if o.MaxKeys > 0 {
		s.maxKeys = o.MaxKeys
	}
	return s
}

func (l *Limiter) settings() *settings {
	l.once.Do(func() { l.s = l.opts.resolve() })
	return &l.s
}

// For returns the Limit of key, created at the Initial limit when the key
// is new.
func (l *Limiter) For(key string) *Limit {
	if v, ok := l.keys.Load(key); ok {
		return v.(*Limit)
	}
	s := l.settings()
	l.mu.Lock()
	if v, ok := l.keys.Load(key); ok {
		l.mu.Unlock()
		return v.(*Limit)
	}
	if l.nkeys >= s.maxKeys {
		l.forgetIdle()
	}
	lim := newLimit(s, key)
	l.keys.Store(key, lim)
	l.nkeys++
	l.mu.Unlock()
	if len(s.hooks) > 0 {
		tell(context.Background(), s.hooks, Event{Kind: EventLimit, Name: s.name, Key: key, Limit: int(lim.limit.Load())})
	}
	return lim
}

// forgetIdle drops one key with nothing in flight and nobody waiting, if
// there is one. l.mu must be held.
func (l *Limiter) forgetIdle() {
	l.keys.Range(func(k, v any) bool {
		lim := v.(*Limit)
		lim.mu.Lock()
		idle := lim.inflight == 0 && len(lim.waiters) == 0
		lim.mu.Unlock()
		if idle {
			l.keys.Delete(k)
			l.nkeys--
			return false
		}
		return true
	})
}

// Limit is one key's limit and the calls in flight under it. It is safe
// for concurrent use.
type Limit struct {
	s   *settings
	key string

	mu       sync.Mutex
	g        gradient.Limit
	inflight int
	waiters  []*waiter // FIFO
	// limit is g.limit rounded down, the number of calls admitted at once;
	// published for Current without the lock.
	limit atomic.Int64
}

// waiter is a caller queued for a slot. granted is set, under the
// Limit's lock, when a slot was handed to it.
type waiter struct {
	ready   chan struct{}
	granted bool
}

func newLimit(s *settings, key string) *Limit {
	lim := &Limit{s: s, key: key, g: gradient.New(s.initial, s.min, s.max, s.tolerance)}
	lim.limit.Store(int64(s.initial))
	return lim
}

// Current returns the limit and the calls in flight now.
func (lim *Limit) Current() (limit, inflight int) {
	lim.mu.Lock()
	defer lim.mu.Unlock()
	return int(lim.limit.Load()), lim.inflight
}

// TryAcquire admits a call if the limit has room, without waiting.
func (lim *Limit) TryAcquire(ctx context.Context) (Permit, bool) {
	return lim.admit(ctx, 1, Default)
}

// admit admits a call of priority p if fewer than share of the limit are
// in flight (at least one call is always admitted), without waiting.
func (lim *Limit) admit(ctx context.Context, share float64, p Priority) (Permit, bool) {
	lim.mu.Lock()
	limit := int(lim.limit.Load())
	if lim.inflight >= max(1, int(float64(limit)*share)) || len(lim.waiters) > 0 {
		inflight := lim.inflight
		lim.mu.Unlock()
		lim.refused(ctx, p, limit, inflight)
		return Permit{}, false
	}
	lim.inflight++
	lim.mu.Unlock()
	return Permit{lim: lim, ctx: ctx, start: sinceBase()}, true
}

// Acquire admits a call: at once if the limit has room, or after a wait
// in the queue. It returns ErrLimited if the queue is full or MaxWait
// passes, and the context's cause if the context ends first; the caller
// then has nothing to release.
func (lim *Limit) Acquire(ctx context.Context) (Permit, error) {
	return lim.acquire(ctx, Default)
}

// acquire is Acquire for a call of priority p, the Priority of its
// refusal's Event.
func (lim *Limit) acquire(ctx context.Context, p Priority) (Permit, error) {
	lim.mu.Lock()
	if lim.inflight < int(lim.limit.Load()) && len(lim.waiters) == 0 {
		lim.inflight++
		lim.mu.Unlock()
		return Permit{lim: lim, ctx: ctx, start: sinceBase()}, nil
	}
	if len(lim.waiters) >= lim.s.queue {
		limit, inflight := int(lim.limit.Load()), lim.inflight
		lim.mu.Unlock()
		lim.refused(ctx, p, limit, inflight)
		return Permit{}, ErrLimited
	}
	if err := ctx.Err(); err != nil {
		lim.mu.Unlock()
		return Permit{}, context.Cause(ctx)
	}
	w := &waiter{ready: make(chan struct{})}
	lim.waiters = append(lim.waiters, w)
	lim.mu.Unlock()

	var timeout <-chan time.Time
	if lim.s.maxWait > 0 {
		t := time.NewTimer(lim.s.maxWait)
		defer t.Stop()
		timeout = t.C
	}
	var err error
	select {
	case <-w.ready:
		return Permit{lim: lim, ctx: ctx, start: sinceBase()}, nil
	case <-timeout:
		err = ErrLimited
	case <-ctx.Done():
		err = context.Cause(ctx)
	}
	lim.mu.Lock()
	if w.granted { // a slot came as the wait ended: hand it on
		lim.inflight--
		lim.wake()
	} else {
		lim.remove(w)
	}
	limit, inflight := int(lim.limit.Load()), lim.inflight
	lim.mu.Unlock()
	if err == ErrLimited {
		lim.refused(ctx, p, limit, inflight)
	}
	return Permit{}, err
}

// refused tells the hooks of a refusal.
func (lim *Limit) refused(ctx context.Context, p Priority, limit, inflight int) {
	if len(lim.s.hooks) > 0 {
		tell(ctx, lim.s.hooks, Event{Kind: EventRefused, Name: lim.s.name, Key: lim.key, Priority: p, Limit: limit, InFlight: inflight})
	}
}

// remove takes w out of the queue. lim.mu must be held.
func (lim *Limit) remove(w *waiter) {
	for i, o := range lim.waiters {
		if o == w {
			lim.waiters = append(lim.waiters[:i], lim.waiters[i+1:]...)
			return
		}
	}
}

// wake hands the free slots to the callers at the head of the queue.
// lim.mu must be held.
func (lim *Limit) wake() {
	for len(lim.waiters) > 0 && lim.inflight < int(lim.limit.Load()) {
		w := lim.waiters[0]
		lim.waiters[0] = nil
		lim.waiters = lim.waiters[1:]
		w.granted = true
		lim.inflight++
		close(w.ready)
	}
}

// release ends a call admitted by lim; sample says whether its latency
// and outcome teach the limit anything.
func (lim *Limit) release(ctx context.Context, took time.Duration, sample, drop bool) (limit int, changed bool) {
	lim.mu.Lock()
	old := lim.limit.Load()
	if sample {
		lim.limit.Store(int64(lim.g.Update(took, lim.inflight, drop)))
	}
	lim.inflight--
	lim.wake()
	now, inflight := lim.limit.Load(), lim.inflight
	lim.mu.Unlock()
	if now != old && len(lim.s.hooks) > 0 {
		tell(ctx, lim.s.hooks, Event{Kind: EventLimit, Name: lim.s.name, Key: lim.key, Limit: int(now), InFlight: inflight})
	}
	return int(now), now != old
}

// Permit is one admitted call. Exactly one of Done and Cancel must be
// called on it when the call ends; the zero Permit admits nothing and
// both are no-ops on it.
type Permit struct {
	lim   *Limit
	ctx   context.Context // the caller's, for the hooks
	start time.Duration   // when it was admitted, as sinceBase reads it
}

// base is the origin of sinceBase's clock: a monotonic reading is
// cheaper than time.Now, which also reads the wall clock.
var base = time.Now()

func sinceBase() time.Duration { return time.Since(base) }

// Done ends the call and teaches the limit its latency, from the
// admission to now, and whether it was a drop: a timeout, or a refusal of
// the server's (429, 503) that says it is overloaded. It returns the limit
// after the sample, and whether the sample changed it.
func (p Permit) Done(drop bool) (limit int, changed bool) {
	if p.lim == nil {
		return 0, false
	}
	return p.lim.release(p.ctx, sinceBase()-p.start, true, drop)
}

// Cancel ends a call whose outcome teaches nothing, one the caller
// abandoned, and frees its slot.
func (p Permit) Cancel() {
	if p.lim != nil {
		p.lim.release(p.ctx, 0, false, false)
	}
}

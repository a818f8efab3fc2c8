package overload

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/retryhttp/retryhttp/internal/backlog"
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
// comment, those of failsafe-go's adaptive limiter for the bounds.
//
// The limit is AIMD on the latency's rise above its no-load level, the
// rule of TCP Vegas and of Envoy's adaptive concurrency filter. The
// calls' latencies are judged in rounds of about a limit's worth of calls
// (at least 8). A round whose average is more than Tolerance times the
// no-load latency cuts the limit to a little under the calls in flight at
// which the latency would be the no-load one (0.9 times the calls in
// flight times the no-load latency over the round's, a quarter of them at
// least); any other round of a limit in use (at least half of it in
// flight) adds one. A drop (a timeout, a 429 or a 503: a server that
// sheds answers fast, and its refusals do not raise the latency) cuts it
// to half the calls in flight (less for a Tolerance above 1.5), once a
// round. The no-load latency is the average of the rounds that had the
// fewest calls in flight over the last few dozen rounds; the cuts take the
// limit there each cycle, so it keeps being measured while the server
// stays loaded. At the start, a limit in use is halved each round while
// halving the calls in flight lowers the latency by a quarter or more (an
// Initial far over a small server's capacity is left in a few rounds),
// then doubled each round, as TCP's slow start, until its first cut.
//
// A round takes in the calls still in flight from the rounds before it,
// back to the last cut, so that a server that serves its line out of
// order (a lock under contention), and ends its fastest calls first, is
// judged on its slow ones too.
//
// A rise of less than 250 µs over the no-load latency never cuts, and one
// call counts for at most 4 times the latency that cuts: below that, and
// in a lone slow call, is the client's own scheduling (a goroutine woken
// late, a preemption, a GC pause), not a queue at the server. Without it
// a fast in-process server under 64 goroutines on 2 cores had its limit
// cut from 130 to 15 and back on rises of 3 to 45 µs, queueing every
// call. So a server whose no-load latency is under 0.5 ms is let run a
// little past 1.5 times its capacity.
//
// What it does, measured on servers of capacity 2 to 32 whose latency
// rises linearly, quadratically, or as a line served in order or out of
// order past their capacity, 48 callers, with and without attempt
// timeouts (TestLimitFollowsCapacity, in virtual time): the calls in
// flight at the server average 0.9 to 1.35 times its capacity (1.5 where
// the 48 callers are all there are, at 32), and within 1.5 times the new
// one within 1 to 3 s of its halving; a Shedder at three times the load
// holds 0.8 to 1.3 times.
// Why not Gradient2 (Netflix's concurrency-limits), which judges the
// latency against its own long-term average: on a server that stays
// overloaded the average rises with the queue it should measure, and the
// limit grows with it to every caller there is (48 of 48 at a capacity of
// 2 to 12). The cost: a server that serves one request at a time, in
// order, under Poisson arrivals is kept near its no-load latency, not
// full (docs/simulator.md); raise Tolerance, or give callers a Queue,
// where a queue is worth its latency.
type Options struct {
	// Min is the lowest the limit goes. 0 means 1.
	Min int
	// Max is the highest the limit goes. 0 means 200.
	Max int
	// Initial is the limit a key starts with, before any latency is
	// known. 0 means 20, or Min if that is more, or Max if less.
	Initial int
	// Tolerance is how far the latency may rise above its no-load level
	// before the limit is cut: 1.5 lets it rise by half, which holds a
	// server whose latency grows in proportion past its capacity to 1.5
	// times it at most. 0 means 1.5; a value below 1 is an error.
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
		idle := inFlight(lim.slots.Load()) == 0 && len(lim.waiters) == 0
		lim.mu.Unlock()
		if idle {
			lim.forgotten.Store(true)
			l.keys.Delete(k)
			l.nkeys--
			return false
		}
		return true
	})
}

// Limit is one key's limit and the calls in flight under it. It is safe
// for concurrent use.
//
// Admission takes no lock: a compare-and-swap on the count in flight,
// when nobody waits. A call's latency is read, and the limit moved, for
// every call admitted while the limit is in use (at least half of it in
// flight: the only samples that let it grow) and for one in sampleEvery
// of the others, which still measure the latency; a drop is always
// counted. So a host far below its limit costs two atomic additions per
// call and no clock reading most of the time.
type Limit struct {
	s   *settings
	key string

	// slots is the calls in flight (its low 32 bits) and the calls
	// admitted so far (its high 32 bits, wrapping), to sample one in
	// sampleEvery: one word, so that an admission is one
	// compare-and-swap.
	slots     atomic.Uint64
	forgotten atomic.Bool  // dropped from the Limiter's keys to make room
	waiting   atomic.Int64 // len(waiters), read without the lock
	// limit is the gradient's limit rounded down, the number of calls
	// admitted at once; written under mu.
	limit atomic.Int64

	mu      sync.Mutex
	g       gradient.Limit
	waiters []*waiter // FIFO
	// horizon is when the handler will have served the requests a
	// Shedder shed so far: the critical ones, and the others (see
	// retryAfter).
	horizon [2]backlog.Horizon
}

// admitOne is what an admission adds to Limit.slots; releaseOne, what a
// release adds (one less in flight).
const (
	admitOne   = 1<<32 | 1
	releaseOne = ^uint64(0)
)

// inFlight returns the calls in flight in a reading of Limit.slots.
func inFlight(slots uint64) int64 { return int64(uint32(slots)) }

// sampleEvery is how often a call admitted while the limit is not in use
// has its latency read. A read sample takes the lock at its release: one
// in 8 cost Parallel64 with the limit (bench/, 64 goroutines far below the
// limit) 337 ns a request against 308 ns at one in 64, medians of 8
// interleaved runs (the 308 measured with an admission by atomic add,
// which alone measured 336 and was not kept); one in 64 still reads a
// host at 1,000 requests a second 15 times a second.
const sampleEvery = 64

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

// Forgotten reports whether the Limiter has forgotten lim to make room
// for another key (Options.MaxKeys). A forgotten Limit still works, but
// For returns a new one for its key, shared by the key's other callers:
// a caller that keeps a Limit between calls asks For again once this
// reports true.
func (lim *Limit) Forgotten() bool { return lim.forgotten.Load() }

// Current returns the limit and the calls in flight now.
func (lim *Limit) Current() (limit, inflight int) {
	return int(lim.limit.Load()), int(inFlight(lim.slots.Load()))
}

// TryAcquire admits a call if the limit has room, without waiting. A
// refusal's Event carries the priority of ctx (WithPriority), or Default.
func (lim *Limit) TryAcquire(ctx context.Context) (Permit, bool) {
	if w, limit, ok := lim.take(); ok {
		return lim.permit(ctx, w, limit), true
	}
	p, _ := PriorityFrom(ctx)
	lim.refused(ctx, p, int(lim.limit.Load()), int(inFlight(lim.slots.Load())))
	return Permit{}, false
}

// admit admits a call of priority p if fewer than share percent of the
// limit are in flight (at least one call is always admitted) and nobody
// waits, without waiting.
func (lim *Limit) admit(ctx context.Context, share int64, p Priority) (Permit, bool) {
	if w, limit, ok := lim.takeShare(share); ok {
		return lim.permit(ctx, w, limit), true
	}
	lim.refused(ctx, p, int(lim.limit.Load()), int(inFlight(lim.slots.Load())))
	return Permit{}, false
}

// take takes a slot if the limit has room and nobody waits, and returns
// the slots its admission left and the limit it was admitted under.
func (lim *Limit) take() (slots uint64, limit int64, ok bool) {
	for {
		w, limit := lim.slots.Load(), lim.limit.Load()
		if inFlight(w) >= limit || lim.waiting.Load() > 0 {
			return 0, 0, false
		}
		if lim.slots.CompareAndSwap(w, w+admitOne) {
			return w + admitOne, limit, true
		}
	}
}

// takeShare is take for a call admitted only while fewer than share
// percent of the limit are in flight (one call always is), compared in
// integers so that no share is rounded down. It is take written again
// rather than take with a share of 100, so that take stays small enough
// to be inlined into Acquire (39 ns for an admission and its release,
// against 43).
func (lim *Limit) takeShare(share int64) (slots uint64, limit int64, ok bool) {
	for {
		w, limit := lim.slots.Load(), lim.limit.Load()
		if n := inFlight(w); (n > 0 && n*100 >= limit*share) || lim.waiting.Load() > 0 {
			return 0, 0, false
		}
		if lim.slots.CompareAndSwap(w, w+admitOne) {
			return w + admitOne, limit, true
		}
	}
}

// permit is the Permit of a call whose admission left slots, itself
// included, under limit: sampled if the limit is in use, and otherwise one
// call in sampleEvery (by the admission count: no atomic operation of its
// own, and the calls of a key are not in step with it).
func (lim *Limit) permit(ctx context.Context, slots uint64, limit int64) Permit {
	inflight := inFlight(slots)
	pm := Permit{lim: lim, ctx: ctx, inflight: inflight}
	if inflight*2 >= limit || (slots>>32)%sampleEvery == 0 {
		pm.start, pm.sampled = sinceBase(), true
	}
	return pm
}

// Acquire admits a call: at once if the limit has room, or after a wait
// in the queue. It returns ErrLimited if the queue is full or MaxWait
// passes, and the context's cause if the context ends first; the caller
// then has nothing to release. A refusal's Event carries the priority of
// ctx (WithPriority), or Default; the queue serves its callers in order,
// whatever their priority (a Shedder's queue holds Critical requests
// alone).
func (lim *Limit) Acquire(ctx context.Context) (Permit, error) {
	if w, limit, ok := lim.take(); ok {
		return lim.permit(ctx, w, limit), nil
	}
	p, _ := PriorityFrom(ctx)
	return lim.wait(ctx, p)
}

// acquire is Acquire for a call of priority p, the Priority of its
// refusal's Event.
func (lim *Limit) acquire(ctx context.Context, p Priority) (Permit, error) {
	if w, limit, ok := lim.take(); ok {
		return lim.permit(ctx, w, limit), nil
	}
	return lim.wait(ctx, p)
}

// wait is acquire once the limit had no room: a wait in the queue, if it
// has room.
func (lim *Limit) wait(ctx context.Context, p Priority) (Permit, error) {
	lim.mu.Lock()
	// Counted as waiting before the count in flight is read again: a
	// release that decremented it either is seen here, or sees the waiter
	// and wakes it (under mu, once it is in the queue).
	lim.waiting.Add(1)
	for {
		w := lim.slots.Load()
		if inFlight(w) >= lim.limit.Load() || len(lim.waiters) > 0 {
			break
		}
		if lim.slots.CompareAndSwap(w, w+admitOne) {
			lim.waiting.Add(-1)
			lim.mu.Unlock()
			return lim.permit(ctx, w+admitOne, lim.limit.Load()), nil
		}
	}
	if len(lim.waiters) >= lim.s.queue {
		lim.waiting.Add(-1)
		lim.mu.Unlock()
		lim.refused(ctx, p, int(lim.limit.Load()), int(inFlight(lim.slots.Load())))
		return Permit{}, ErrLimited
	}
	if err := ctx.Err(); err != nil {
		lim.waiting.Add(-1)
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
		return Permit{lim: lim, ctx: ctx, start: sinceBase(), sampled: true, inflight: lim.limit.Load()}, nil
	case <-timeout:
		err = ErrLimited
	case <-ctx.Done():
		err = context.Cause(ctx)
	}
	lim.mu.Lock()
	if w.granted { // a slot came as the wait ended: hand it on
		lim.slots.Add(releaseOne)
		lim.wake()
	} else {
		lim.remove(w)
	}
	lim.mu.Unlock()
	if err == ErrLimited {
		lim.refused(ctx, p, int(lim.limit.Load()), int(inFlight(lim.slots.Load())))
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
			lim.waiting.Add(-1)
			return
		}
	}
}

// wake hands the free slots to the callers at the head of the queue.
// lim.mu must be held.
func (lim *Limit) wake() {
	for len(lim.waiters) > 0 {
		n := lim.slots.Load()
		if inFlight(n) >= lim.limit.Load() {
			return
		}
		if !lim.slots.CompareAndSwap(n, n+admitOne) {
			continue
		}
		w := lim.waiters[0]
		lim.waiters[0] = nil
		lim.waiters = lim.waiters[1:]
		lim.waiting.Add(-1)
		w.granted = true
		close(w.ready)
	}
}

// release ends a call admitted by lim at admitted, with inflight in
// flight, itself included (the count its sample is judged by, as
// concurrency-limits does), and ended at now. A call with a latency to
// teach (sampled) or a drop moves the limit under the lock; any other only
// gives its slot back, and takes the lock only if someone waits for it.
func (lim *Limit) release(ctx context.Context, admitted, now time.Duration, inflight int64, sampled, drop bool) (limit int, changed bool) {
	if !sampled && !drop {
		return lim.free()
	}
	lim.mu.Lock()
	old := lim.limit.Load()
	lim.limit.Store(int64(lim.g.Update(admitted, now, int(inflight), drop)))
	lim.slots.Add(releaseOne)
	lim.wake()
	cur, after := lim.limit.Load(), inFlight(lim.slots.Load())
	lim.mu.Unlock()
	if cur != old && len(lim.s.hooks) > 0 {
		tell(ctx, lim.s.hooks, Event{Kind: EventLimit, Name: lim.s.name, Key: lim.key, Limit: int(cur), InFlight: int(after)})
	}
	return int(cur), cur != old
}

// free gives a slot back, and wakes a waiter if there is one.
func (lim *Limit) free() (limit int, changed bool) {
	lim.slots.Add(releaseOne)
	if lim.waiting.Load() > 0 {
		lim.mu.Lock()
		lim.wake()
		lim.mu.Unlock()
	}
	return int(lim.limit.Load()), false
}

// Permit is one admitted call. Exactly one of Done and Cancel must be
// called on it when the call ends; the zero Permit admits nothing and
// both are no-ops on it.
type Permit struct {
	lim      *Limit
	ctx      context.Context // the caller's, for the hooks
	start    time.Duration   // when it was admitted, as sinceBase reads it, if sampled
	inflight int64           // the calls in flight when it was admitted, itself included
	sampled  bool            // its latency is read
}

// base is the origin of sinceBase's clock: a monotonic reading is
// cheaper than time.Now, which also reads the wall clock.
var base = time.Now()

// sinceBase reads the monotonic clock. Only differences of its readings
// mean anything (inside a synctest bubble, whose clock starts in 2000,
// they are negative).
func sinceBase() time.Duration { return time.Since(base) }

// Done ends the call and teaches the limit whether it was a drop (a
// timeout, or a refusal of the server's, 429 or 503, that says it is
// overloaded) and, if it was sampled, its latency, from the admission to
// now. It returns the limit after it, and whether it changed it.
func (p Permit) Done(drop bool) (limit int, changed bool) {
	switch {
	case p.lim == nil:
		return 0, false
	case !p.sampled && !drop:
		return p.lim.free()
	case !p.sampled: // a drop, counted in the round it ends in
		now := sinceBase()
		return p.lim.release(p.ctx, now, now, p.inflight, false, drop)
	}
	return p.lim.release(p.ctx, p.start, sinceBase(), p.inflight, true, drop)
}

// Cancel ends a call whose outcome teaches nothing, one the caller
// abandoned, and frees its slot.
func (p Permit) Cancel() {
	if p.lim != nil {
		p.lim.release(p.ctx, 0, 0, 0, false, false)
	}
}

package idempotency

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/retryhttp/retryhttp/internal/opkey"
)

// Runner runs a function at most once per key across the processes that
// share its Store: the form of the middleware for queue consumers and jobs,
// where a message is delivered at least once and its effect must happen
// once. The first Do of a key runs fn and stores its result; a duplicate
// (a redelivery, a second consumer) gets the stored result without running
// fn; a failed run releases the key, so the next delivery runs fn again.
//
// Key the work by its business identity (an order ID, a payment ID), not by
// the message: two messages about one order are one effect. Calls fn makes
// through a retryhttp.Transport with InjectIdempotencyKey send keys derived
// from it, the same on every run.
type Runner struct {
	claims
	opts RunnerOptions
	tx   TxStore
}

// RunnerOptions configure a Runner. Each zero field takes the default in
// its comment.
type RunnerOptions struct {
	// Store keeps the records. nil means a NewMemoryStore(0): one process
	// only.
	Store Store
	// Kind names the kind of work ("payments", "emails") and separates
	// its keys from those of other kinds sharing a Store: keys of
	// different kinds never collide, nor with the middleware's keys (whose
	// Scope is a caller's identity).
	Kind string
	// Retention is how long a result is kept and handed to duplicates: it
	// must exceed the longest redelivery delay of the queue. 0 means
	// DefaultRetention.
	Retention time.Duration
	// LockTimeout is how long a claim holds its key after its process stops
	// extending it (it died). 0 means DefaultLockTimeout.
	LockTimeout time.Duration
	// StoreTimeout bounds each store call, as Options.StoreTimeout does. 0
	// means DefaultStoreTimeout, or LockTimeout/3 if that is shorter.
	StoreTimeout time.Duration
	// MaxWait bounds how long Do waits for a run of the same key elsewhere
	// to finish; then it returns ErrInFlight, for the caller to redeliver
	// later. 0 means LockTimeout.
	MaxWait time.Duration
	// Transactional runs fn in a transaction of the Store, which must be a
	// TxStore (pgstore): fn's writes through it (pgstore.Tx) and the stored
	// result commit or roll back together.
	Transactional bool
	// Logger gets store errors; nil means slog.Default().
	Logger *slog.Logger
	// Hooks are told of each Do's result (new, replayed, released,
	// in_flight, store_error) and of each claim that lapsed (see Hook).
	Hooks []Hook
	// CacheEntries and CacheBytes keep completed results in memory, as
	// Options.CacheEntries and Options.CacheBytes do for the middleware:
	// a duplicate delivery of a key this process ran or replayed is
	// answered without asking the store. 0 means no cache.
	CacheEntries int
	CacheBytes   int64
}

// ErrInFlight is returned by Runner.Do when another run of the key is
// still under way after MaxWait.
var ErrInFlight = errors.New("idempotency: the key is being processed elsewhere")

// NewRunner validates opts and returns a Runner.
func NewRunner(opts RunnerOptions) (*Runner, error) {
	if err := claimTimes(&opts.Retention, &opts.LockTimeout, &opts.MaxWait, &opts.StoreTimeout); err != nil {
		return nil, err
	}
	if opts.Store == nil {
		opts.Store, _ = NewMemoryStore(0)
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	cache, err := newReplayCache(opts.CacheEntries, opts.CacheBytes)
	if err != nil {
		return nil, err
	}
	r := &Runner{opts: opts, claims: newClaims(opts.Store, opts.LockTimeout, opts.StoreTimeout, opts.Logger, opts.Hooks)}
	r.cache = cache
	if opts.Transactional {
		tx, ok := opts.Store.(TxStore)
		if !ok {
			return nil, fmt.Errorf("idempotency: Transactional needs a TxStore; %T is not one", opts.Store)
		}
		r.tx = tx
	}
	return r, nil
}

// jobFingerprint is the fingerprint of every run: a job's key names its
// work, there is no payload to compare.
const jobFingerprint = "job"

// Do runs fn once for key. It returns fn's result, or the stored result of
// an earlier run with replayed true. An error from fn is returned and the
// key released, so that a redelivery runs fn again; so is a panic, which
// goes on. A store error before fn runs is returned without running it:
// fn never runs unprotected. A store error after fn ran is logged and
// returned with fn's result: the effect happened, and the claim holds the
// key until LockTimeout.
func (r *Runner) Do(ctx context.Context, key string, fn func(ctx context.Context) ([]byte, error)) (result []byte, replayed bool, err error) {
	res, cached := ResultNew, false
	if len(r.hooks) > 0 {
		defer func() { r.emit(ctx, Event{Kind: EventResult, Result: res, Cached: cached, RunnerKind: r.opts.Kind}) }()
	}
	if key == "" {
		return nil, false, errors.New("idempotency: Runner.Do: empty key")
	}
	scope := "job\x00" + r.opts.Kind
	op := &opkey.Op{ID: StoreKey(scope, key), Key: key, Scope: scope}
	rec, owner, sent, err := r.claim(ctx, op.ID, jobFingerprint, true, r.opts.MaxWait)
	switch {
	case err != nil:
		res = ResultStoreError
		return nil, false, fmt.Errorf("idempotency: claim: %w", err)
	case rec == nil:
		// ours: run fn
	case rec.Response != nil && rec.cached:
		res, cached = ResultReplayed, true
		return bytes.Clone(rec.Response.Body), true, nil // the cache's own copy stays the cache's
	case rec.Response != nil:
		res = ResultReplayed
		return rec.Response.Body, true, nil
	case ctx.Err() != nil:
		res = ResultInFlight
		return nil, false, context.Cause(ctx)
	default:
		res = ResultInFlight
		return nil, false, ErrInFlight
	}
	res = ResultReleased // what a panic leaves
	result, replayed, res, err = r.run(ctx, op, owner, sent, fn)
	return result, replayed, err
}

func (r *Runner) run(ctx context.Context, op *opkey.Op, owner string, sent time.Time, fn func(context.Context) ([]byte, error)) (result []byte, replayed bool, res Result, err error) {
	var k claimKeeper
	var out []byte
	var fnErr error
	var stored *Response // kept by the cache, if there is one
	_, stage, err := r.claims.run(ctx, &k, op, owner, sent, r.tx, r.opts.Retention, func(ctx context.Context) (*Response, bool) {
		out, fnErr = fn(ctx)
		if fnErr != nil {
			return nil, false
		}
		resp := &Response{Status: http.StatusOK, Body: out}
		if r.cache != nil { // fn's caller owns out: the cache keeps a copy
			resp.Body = bytes.Clone(out)
			stored = resp
		}
		return resp, true
	})
	switch {
	case fnErr != nil:
		return nil, false, ResultReleased, fnErr
	case stage == stageComplete:
		r.log(ctx, slog.LevelError, "idempotency: store complete failed; the key is held until LockTimeout, then a redelivery runs again", err)
		return out, false, ResultStoreError, fmt.Errorf("idempotency: complete: %w", err)
	case err != nil:
		return nil, false, ResultStoreError, fmt.Errorf("idempotency: %s: %w", stage, err)
	}
	r.remember(op.ID, jobFingerprint, stored, sent, r.opts.Retention)
	return out, false, ResultNew, nil
}

// Package idempotency is server-side middleware that honours the
// Idempotency-Key request header, so that a client may retry a POST
// without causing a second side effect: exactly-once effect under
// at-least-once delivery (draft-ietf-httpapi-idempotency-key-header, and
// Stripe's behaviour).
//
// For each request with a key, the first runs the handler; its response is
// stored and replayed, byte for byte, to every retry with the same key and
// payload (with Idempotent-Replayed: true). A retry that arrives while the
// first is still running gets 409 with Retry-After. The same key with a
// different payload gets 422. Only final answers are stored (2xx, and 4xx
// other than 408, 409 and 429); after a 5xx, a timeout status or a panic
// the claim is released so that the retry runs again. A store that fails
// before the handler runs gets 503 and the handler never runs unprotected.
// A store that fails to record the response after the handler ran (and
// outside transactional mode) keeps the claim until LockTimeout instead of
// releasing it: the effect has happened, and a released key would let the
// retry cause it again.
//
// Responses are buffered until they are stored, so a handler that flushes
// early is delivered in one piece at the end (see MaxResponseBytes for
// large ones).
//
// Keys are scoped. By default the scope is a hash of the Authorization
// header, so two callers can never read each other's stored responses.
// IMPORTANT: requests without an Authorization header share one anonymous
// scope. If your callers authenticate some other way (a cookie, mTLS, an
// API key in another header), set Options.Scope to return the caller's
// identity, or one caller can replay another's response by guessing its
// key.
//
// Retention must exceed the client's whole retry window: a retry that
// arrives after its key expired runs the handler again.
package idempotency

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"time"

	"github.com/google/uuid"
)

// Options configure a Middleware. Each zero field takes the default in its
// comment.
type Options struct {
	// Store keeps the records. nil means NewMemoryStore(0), which is right
	// only for a single process.
	Store Store
	// Methods the middleware applies to; others pass through untouched.
	// nil means POST and PATCH.
	Methods []string
	// RequireKey answers 400 to a request of those methods without a key.
	// false lets it through unprotected.
	RequireKey bool
	// Scope returns the caller's identity; (scope, key) is what is stored.
	// nil means AuthorizationScope. An error answers 401.
	Scope func(*http.Request) (string, error)
	// Retention is how long a final response is kept and replayed. It must
	// exceed the client's retry window. 0 means 24h.
	Retention time.Duration
	// LockTimeout is how long an in-flight claim holds its key when its
	// process dies without releasing it. Set it above the handler's longest
	// run: a claim that outlives it can be taken by a retry. 0 means 60s.
	LockTimeout time.Duration
	// WaitForResult makes a request whose key is in flight wait for the
	// first one's response (polling the store, bounded by the request's
	// context) instead of answering 409.
	WaitForResult bool
	// MaxRequestBytes bounds the body read to fingerprint a request; a
	// longer one gets 413. 0 means 1 MiB.
	MaxRequestBytes int64
	// MaxResponseBytes bounds the response body stored. A longer response
	// is streamed to the client and its replays answer 500 (the effect
	// happened; the body was not kept); in transactional mode it is rolled
	// back and answered 500 instead. 0 means 1 MiB.
	MaxResponseBytes int64
	// Transactional runs the handler in a transaction of the Store, which
	// must implement TxStore (pgstore does), that also stores the
	// response: the handler's own writes and the stored response commit or
	// roll back together.
	Transactional bool
	// Metrics, if set, counts results (see NewMetrics).
	Metrics *Metrics
	// Logger, if set, records store errors. Keys are not logged.
	Logger *slog.Logger
}

// Middleware applies Options to handlers. It is safe for concurrent use.
type Middleware struct {
	opts Options
	tx   TxStore
}

// Defaults of Options.
const (
	DefaultRetention   = 24 * time.Hour
	DefaultLockTimeout = 60 * time.Second
	defaultMaxBytes    = 1 << 20
)

// New validates opts and returns a Middleware.
func New(opts Options) (*Middleware, error) {
	switch {
	case opts.Retention < 0:
		return nil, fmt.Errorf("idempotency: Retention %v is negative", opts.Retention)
	case opts.LockTimeout < 0:
		return nil, fmt.Errorf("idempotency: LockTimeout %v is negative", opts.LockTimeout)
	case opts.MaxRequestBytes < 0:
		return nil, fmt.Errorf("idempotency: MaxRequestBytes %d is negative", opts.MaxRequestBytes)
	case opts.MaxResponseBytes < 0:
		return nil, fmt.Errorf("idempotency: MaxResponseBytes %d is negative", opts.MaxResponseBytes)
	}
	if opts.Store == nil {
		opts.Store = NewMemoryStore(0)
	}
	if opts.Methods == nil {
		opts.Methods = []string{http.MethodPost, http.MethodPatch}
	}
	if opts.Scope == nil {
		opts.Scope = AuthorizationScope
	}
	if opts.Retention == 0 {
		opts.Retention = DefaultRetention
	}
	if opts.LockTimeout == 0 {
		opts.LockTimeout = DefaultLockTimeout
	}
	if opts.MaxRequestBytes == 0 {
		opts.MaxRequestBytes = defaultMaxBytes
	}
	if opts.MaxResponseBytes == 0 {
		opts.MaxResponseBytes = defaultMaxBytes
	}
	m := &Middleware{opts: opts}
	if opts.Transactional {
		tx, ok := opts.Store.(TxStore)
		if !ok {
			return nil, fmt.Errorf("idempotency: Transactional needs a TxStore; %T is not one", opts.Store)
		}
		m.tx = tx
	}
	return m, nil
}

// Handler wraps next.
func (m *Middleware) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { m.serve(w, r, next) })
}

// HeaderReplayed marks a replayed response.
const HeaderReplayed = "Idempotent-Replayed"

func (m *Middleware) serve(w http.ResponseWriter, r *http.Request, next http.Handler) {
	if !slices.Contains(m.opts.Methods, r.Method) {
		next.ServeHTTP(w, r)
		return
	}
	values := r.Header.Values("Idempotency-Key")
	if len(values) == 0 {
		m.opts.Metrics.count(ResultMissingKey)
		if m.opts.RequireKey {
			problem(w, http.StatusBadRequest, "missing Idempotency-Key", "this endpoint requires an Idempotency-Key header")
			return
		}
		next.ServeHTTP(w, r)
		return
	}
	if len(values) > 1 {
		m.opts.Metrics.count(ResultInvalidKey)
		problem(w, http.StatusBadRequest, "invalid Idempotency-Key", "send exactly one Idempotency-Key header")
		return
	}
	key, err := parseKey(values[0])
	if err != nil {
		m.opts.Metrics.count(ResultInvalidKey)
		problem(w, http.StatusBadRequest, "invalid Idempotency-Key", err.Error())
		return
	}
	scope, err := m.opts.Scope(r)
	if err != nil {
		problem(w, http.StatusUnauthorized, "no caller identity", "the idempotency scope could not be determined")
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, m.opts.MaxRequestBytes+1))
	r.Body.Close()
	if err != nil {
		problem(w, http.StatusBadRequest, "unreadable body", "the request body could not be read")
		return
	}
	if int64(len(body)) > m.opts.MaxRequestBytes {
		problem(w, http.StatusRequestEntityTooLarge, "request too large",
			fmt.Sprintf("requests with an Idempotency-Key are limited to %d bytes", m.opts.MaxRequestBytes))
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	fp := fingerprint(r.Method, r.URL.Path, r.Header.Get("Content-Type"), body)
	k := StoreKey(scope, key)
	owner := uuid.NewString()

	ctx := r.Context()
	for wait := 25 * time.Millisecond; ; wait = min(2*wait, time.Second) {
		rec, err := m.opts.Store.Claim(ctx, k, fp, owner, m.opts.LockTimeout)
		if err != nil {
			m.opts.Metrics.count(ResultStoreError)
			m.storeError(w, r, "claim", err)
			return
		}
		if rec == nil {
			break // ours: run the handler
		}
		if rec.Fingerprint != fp {
			m.opts.Metrics.count(ResultMismatch)
			problem(w, http.StatusUnprocessableEntity, "Idempotency-Key reused",
				"this key was used for a request with a different method, path or body")
			return
		}
		if rec.Response != nil {
			m.opts.Metrics.count(ResultReplayed)
			replay(w, rec.Response)
			return
		}
		if !m.opts.WaitForResult {
			m.inFlight(w, "a request with this Idempotency-Key is still being processed; retry later")
			return
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			m.inFlight(w, "gave up waiting for the request with this Idempotency-Key")
			return
		case <-t.C:
		}
	}
	m.run(w, r, next, k, owner)
}

// run executes the handler under owner's claim on k and stores or releases
// the outcome. It counts one result for the request, however it ends.
func (m *Middleware) run(w http.ResponseWriter, r *http.Request, next http.Handler, k, owner string) {
	result := ResultNew
	defer func() { m.opts.Metrics.count(result) }()
	// Store operations after the handler use a context that outlives a
	// client that hung up: the effect happened, its record must be kept.
	bg := context.WithoutCancel(r.Context())
	var tx Tx
	// abandon undoes the attempt so that a retry runs the handler again:
	// the transaction's writes, then the claim. A failed release is only
	// logged: the claim frees itself after LockTimeout.
	abandon := func() {
		if tx != nil {
			tx.Rollback(bg)
		}
		if err := m.opts.Store.Release(bg, k, owner); err != nil {
			m.log(r, "release", err)
		}
	}
	if m.tx != nil {
		var ctx context.Context
		var err error
		if tx, ctx, err = m.tx.Begin(r.Context(), k, owner); err != nil {
			abandon()
			result = ResultStoreError
			m.storeError(w, r, "begin", err)
			return
		}
		r = r.WithContext(ctx)
	}
	rec := newRecorder(w, m.opts.MaxResponseBytes, tx != nil)
	finished := false
	defer func() {
		if !finished { // the handler panicked: undo, then let the panic go on
			abandon()
		}
	}()
	next.ServeHTTP(rec, r)
	finished = true

	switch {
	case rec.overflow:
		abandon()
		problem(w, http.StatusInternalServerError, "response too large",
			fmt.Sprintf("the response exceeded %d bytes and could not be recorded; nothing was committed", m.opts.MaxResponseBytes))
		return
	case !terminal(rec.statusCode()):
		abandon()
	case tx != nil:
		if err := tx.Commit(bg, rec.response(), m.opts.Retention); err != nil {
			// Rolled back: no effect, no record. Free the key for the retry.
			abandon()
			result = ResultStoreError
			m.storeError(w, r, "commit", err)
			return
		}
	default:
		if err := m.opts.Store.Complete(bg, k, owner, rec.response(), m.opts.Retention); err != nil {
			// The effect happened and cannot be undone. Keep the claim (it
			// expires after LockTimeout) and give the client its answer.
			result = ResultStoreError
			m.log(r, "complete", err)
		}
	}
	rec.send()
}

// terminal reports whether a status is a final answer worth replaying:
// 2xx, and 4xx other than the ones that invite a retry.
func terminal(status int) bool {
	switch {
	case status >= 200 && status < 300:
		return true
	case status == http.StatusRequestTimeout, status == http.StatusConflict, status == http.StatusTooManyRequests:
		return false
	case status >= 400 && status < 500:
		return true
	}
	return false
}

func replay(w http.ResponseWriter, resp *Response) {
	if resp.TooLarge {
		w.Header().Set(HeaderReplayed, "true")
		problem(w, http.StatusInternalServerError, "response not recorded",
			"the request was processed, but its response was too large to record and cannot be replayed")
		return
	}
	h := w.Header()
	for k, v := range resp.Header {
		h[k] = v
	}
	h.Set(HeaderReplayed, "true")
	w.WriteHeader(resp.Status)
	w.Write(resp.Body)
}

// inFlight answers 409: the key's first request is still running.
func (m *Middleware) inFlight(w http.ResponseWriter, detail string) {
	m.opts.Metrics.count(ResultInFlight)
	w.Header().Set("Retry-After", "1")
	problem(w, http.StatusConflict, "request in progress", detail)
}

// storeError answers a request the store failed, after logging why.
func (m *Middleware) storeError(w http.ResponseWriter, r *http.Request, op string, err error) {
	m.log(r, op, err)
	w.Header().Set("Retry-After", "1")
	problem(w, http.StatusServiceUnavailable, "idempotency store unavailable",
		"the request was not processed; retry later")
}

func (m *Middleware) log(r *http.Request, op string, err error) {
	if m.opts.Logger == nil || errors.Is(err, context.Canceled) && r.Context().Err() != nil {
		return
	}
	m.opts.Logger.LogAttrs(r.Context(), slog.LevelError, "idempotency: store "+op+" failed",
		slog.String("method", r.Method), slog.String("path", r.URL.Path), slog.String("error", err.Error()))
}

// problem answers with an RFC 9457 problem document.
func problem(w http.ResponseWriter, status int, title, detail string) {
	w.Header().Set("Content-Type", "application/problem+json")
	w.Header().Del("Content-Length")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(struct {
		Title  string `json:"title"`
		Status int    `json:"status"`
		Detail string `json:"detail"`
	}{title, status, detail})
}

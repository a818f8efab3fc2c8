// Package idempotency is server-side middleware that honours the
// Idempotency-Key request header, so that a client may retry a POST
// without causing a second side effect: exactly-once effect under
// at-least-once delivery (draft-ietf-httpapi-idempotency-key-header, and
// Stripe's behaviour). X-Idempotency-Key, the older name the Transport and
// net/http also honour, is read too; a request carrying both must name one
// key.
//
// For each request with a key, the first runs the handler; its response is
// stored and replayed to every retry with the same key and payload (with
// Idempotent-Replayed: true). A retry that arrives while the first is still
// running gets 409 with Retry-After. The same key with a different payload
// (method, path, query or body) gets 422. Only final answers are stored
// (2xx, and 4xx other than 408, 409, 425 and 429); after a 5xx, a timeout status
// or a panic the claim is released so that the retry runs again. A store
// that fails before the handler runs gets 503 and the handler never runs
// unprotected.
//
// A claim lives while its handler runs: the middleware extends it every
// LockTimeout/3, so a slow handler keeps its key while the store answers,
// and LockTimeout only bounds how long a process that died mid-request
// blocks its keys. The times must nest: LockTimeout < the client's retry
// window (retryhttp's MaxElapsed, 30 s by default) < Retention. The
// defaults (10 s, and 24 h) do. Every store call is bounded by
// StoreTimeout (2 s by default): a store that stalls before the claim
// answers 503 within it.
//
// Fencing. When the store stops answering while a handler runs (a
// partition, a stalled connection), the claim may lapse and a retry
// elsewhere take the key. The middleware cannot know whether it did. A
// claim is known held for LockTimeout from the send of the last claim or
// extension that succeeded (on the monotonic clock); once less than a
// sixth of LockTimeout of that is left, the middleware cancels the
// handler's context with ErrClaimLapsed, and an answer of ErrNotOwner
// cancels it with that at once. What holds then:
//   - Transactional mode is exactly-once under a partition: the handler's
//     writes commit only with a stored response under its own claim, so a
//     handler that lost its key rolls back.
//   - A downstream call sent with a key derived from this request's (a
//     retryhttp.Transport with InjectIdempotencyKey) is exactly-once if the
//     downstream dedups by that key: the retry that took over sends the
//     same key.
//   - Any other effect is bounded, not prevented: a handler that checks its
//     context before its effect does not make it once told; one that had
//     made it before the partition, or ignores its context, makes it again
//     when the retry runs. No fencing token is handed to the handler: the
//     stores keep none.
//
// The windows that remain, and what closes them:
//   - A store that stays unreachable after the handler ran, for longer than
//     the middleware retries (a few seconds), cannot record the response:
//     the client gets its answer, the claim expires after LockTimeout, and
//     a retry after that runs the handler again. Transactional mode closes
//     it for writes in the same database: the effect and the record commit
//     together.
//   - A process killed mid-request leaves its claim for up to LockTimeout;
//     a non-transactional effect it made before dying happens again when
//     the retry runs. Transactional mode rolls such an effect back.
//   - Effects outside the store's database (an email, a call to another
//     API) are not undone by a rollback: send them with a key derived from
//     this request's (retryhttp does it, see KeyFromContext), or through a
//     transactional outbox.
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
// key. Set-Cookie is not replayed (see Options.ReplayHeader).
package idempotency

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/retryhttp/retryhttp/internal/opkey"
	"github.com/retryhttp/retryhttp/internal/wire"
)

// Options configure a Middleware. Each zero field takes the default in its
// comment.
type Options struct {
	// Store keeps the records. nil means a NewMemoryStore(0), which is
	// right only for a single process, and whose replay window is bounded
	// by its size as well as by Retention (see MemoryStore).
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
	// exceed the client's retry window, and LockTimeout. 0 means
	// DefaultRetention.
	Retention time.Duration
	// LockTimeout is how long a claim holds its key after its process
	// stops extending it: the longest a crashed request blocks its key.
	// Handlers may run longer: the claim is extended while they run. It
	// should be shorter than the client's retry window, so that the
	// client's retries outlast a crashed claim. 0 means DefaultLockTimeout.
	LockTimeout time.Duration
	// StoreTimeout bounds each store call: a claim that gets no answer in
	// time answers 503 (the handler does not run), and an extension,
	// completion or release is tried again. It must be at most
	// LockTimeout/3. 0 means DefaultStoreTimeout, or LockTimeout/3 if that
	// is shorter.
	StoreTimeout time.Duration
	// WaitForResult makes a request whose key is in flight wait for the
	// first one's response (polling the store) instead of answering 409,
	// for at most MaxWait.
	WaitForResult bool
	// MaxWait bounds a WaitForResult wait; then the request gets 409 with
	// Retry-After. 0 means LockTimeout.
	MaxWait time.Duration
	// MaxRequestBytes bounds the body read to fingerprint a request; a
	// longer one gets 413. 0 means DefaultMaxRequestBytes.
	MaxRequestBytes int64
	// MaxResponseBytes bounds the response body stored. A longer response
	// is streamed to the client and its replays answer 500 (the effect
	// happened; the body was not kept); in transactional mode it is rolled
	// back and answered 500 instead. 0 means DefaultMaxResponseBytes.
	MaxResponseBytes int64
	// Fingerprint, if set, returns what identifies a request's payload in
	// place of the query and the body: for APIs whose requests carry parts
	// that may differ between retries (a timestamp, a nonce), return the
	// parts that matter. Method and path always count. An error answers
	// 400.
	Fingerprint func(r *http.Request, body []byte) ([]byte, error)
	// CacheEntries, if positive, keeps up to that many completed records
	// in this process's memory, least recently used out first, so that a
	// replay of one is answered without asking the store (Event.Cached;
	// idempotency_cached_replays_total). An entry never outlives its
	// record and answers as the store would: its scope is in its key, its
	// fingerprint is compared. It cannot see a record deleted from the
	// store before its expiry, which it replays until then; a key
	// completed by another process is read from the store, then cached. 0
	// means no cache.
	CacheEntries int
	// CacheBytes bounds the cached bodies and headers; a larger response
	// is not cached. 0 means DefaultCacheBytes when CacheEntries is set.
	CacheBytes int64
	// ReplayHeader reports whether a response header field, in canonical
	// form, is stored and replayed. nil means DefaultReplayHeader: all but
	// Set-Cookie. Connection-specific fields and Date are never stored.
	ReplayHeader func(name string) bool
	// Transactional runs the handler in a transaction of the Store, which
	// must implement TxStore (pgstore does), that also stores the
	// response: the handler's own writes and the stored response commit or
	// roll back together.
	Transactional bool
	// Hooks are told of each request's result and of each claim that
	// lapsed, in order (see Hook). Prometheus metrics are one: put a
	// *Metrics (NewMetrics) here.
	Hooks []Hook
	// Logger gets store errors, lost claims and scope errors, never keys.
	// nil means slog.Default(): a store that fails is not silent.
	Logger *slog.Logger
}

// Middleware applies Options to handlers. It is safe for concurrent use.
type Middleware struct {
	claims
	opts      Options
	tx        TxStore
	authScope bool // Scope is the default, AuthorizationScope, computed in place
}

// Defaults of Options.
const (
	DefaultRetention        = 24 * time.Hour
	DefaultLockTimeout      = 10 * time.Second
	DefaultMaxRequestBytes  = 1 << 20
	DefaultMaxResponseBytes = 1 << 20
)

// New validates opts and returns a Middleware.
func New(opts Options) (*Middleware, error) {
	if err := claimTimes(&opts.Retention, &opts.LockTimeout, &opts.MaxWait, &opts.StoreTimeout); err != nil {
		return nil, err
	}
	switch {
	case opts.MaxRequestBytes < 0:
		return nil, fmt.Errorf("idempotency: MaxRequestBytes %d is negative", opts.MaxRequestBytes)
	case opts.MaxResponseBytes < 0:
		return nil, fmt.Errorf("idempotency: MaxResponseBytes %d is negative", opts.MaxResponseBytes)
	}
	if opts.Store == nil {
		opts.Store, _ = NewMemoryStore(0)
	}
	if opts.Methods == nil {
		opts.Methods = wire.KeyedMethods[:]
	}
	authScope := opts.Scope == nil
	if authScope {
		opts.Scope = AuthorizationScope
	}
	if opts.MaxRequestBytes == 0 {
		opts.MaxRequestBytes = DefaultMaxRequestBytes
	}
	if opts.MaxResponseBytes == 0 {
		opts.MaxResponseBytes = DefaultMaxResponseBytes
	}
	if opts.ReplayHeader == nil {
		opts.ReplayHeader = DefaultReplayHeader
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	cache, err := newReplayCache(opts.CacheEntries, opts.CacheBytes)
	if err != nil {
		return nil, err
	}
	m := &Middleware{opts: opts, claims: newClaims(opts.Store, opts.LockTimeout, opts.StoreTimeout, opts.Logger, opts.Hooks)}
	m.cache, m.authScope = cache, authScope
	if opts.Transactional {
		tx, ok := opts.Store.(TxStore)
		if !ok {
			return nil, fmt.Errorf("idempotency: Transactional needs a TxStore; %T is not one", opts.Store)
		}
		m.tx = tx
	}
	if ms, ok := opts.Store.(*MemoryStore); ok {
		for _, h := range opts.Hooks {
			if c, ok := h.(evictionCounter); ok {
				ms.countEarlyEvictionsIn(c.earlyEvictions())
				break
			}
		}
	}
	return m, nil
}

// Handler wraps next.
func (m *Middleware) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { m.serve(w, r, next) })
}

// exchange is what one keyed request needs from reading its body to
// sending its response, in one allocation.
type exchange struct {
	body   bodyReader
	op     opkey.Op
	keeper claimKeeper
	rec    recorder
	attrs  [2]slog.Attr // names the request in logs: method and path, never the key
	fp     string       // the request's fingerprint
}

// bodyReader is a request body read whole, handed to the handler in place
// of the original.
type bodyReader struct{ bytes.Reader }

func (*bodyReader) Close() error { return nil }

// readBody reads r's body, at most limit+1 bytes: one more than allowed
// tells a body that is too long. A declared Content-Length sizes the
// buffer so that the usual body is read with one allocation.
func readBody(r *http.Request, limit int64) ([]byte, error) {
	defer r.Body.Close()
	size := int64(512)
	if r.ContentLength >= 0 && r.ContentLength <= limit {
		size = r.ContentLength + 1 // room to see EOF without growing
	}
	b := make([]byte, 0, size)
	for int64(len(b)) <= limit {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := r.Body.Read(b[len(b):min(int64(cap(b)), limit+1)])
		b = b[:len(b)+n]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
	}
	return b, nil
}

// HeaderReplayed marks a replayed response.
const HeaderReplayed = wire.Replayed

func (m *Middleware) serve(w http.ResponseWriter, r *http.Request, next http.Handler) {
	if !slices.Contains(m.opts.Methods, r.Method) {
		next.ServeHTTP(w, r)
		return
	}
	key, hasKey, err := requestKey(r.Header)
	if !hasKey && !m.opts.RequireKey {
		m.result(r, ResultMissingKey)
		next.ServeHTTP(w, r)
		return
	}
	if err != nil {
		m.result(r, ResultInvalidKey)
		problem(w, http.StatusBadRequest, "invalid Idempotency-Key", err.Error())
		return
	}
	// Identity before the key's presence: an unauthenticated caller learns
	// that first.
	var scope string
	var auth *[sha256.Size]byte // the default scope's digest, written out with the other identities
	if m.authScope {
		sum := authorizationSum(r)
		auth = &sum
	} else if scope, err = m.opts.Scope(r); err != nil {
		m.result(r, ResultUnauthorized)
		m.log(r.Context(), slog.LevelWarn, "idempotency: no caller scope", err, reqAttrs(r)...)
		problem(w, http.StatusUnauthorized, "no caller identity", "the idempotency scope could not be determined")
		return
	}
	if !hasKey {
		m.result(r, ResultMissingKey)
		problem(w, http.StatusBadRequest, "missing Idempotency-Key", "this endpoint requires an Idempotency-Key header")
		return
	}
	body, err := readBody(r, m.opts.MaxRequestBytes)
	if err != nil {
		m.result(r, ResultInvalidKey)
		problem(w, http.StatusBadRequest, "unreadable body", "the request body could not be read")
		return
	}
	if int64(len(body)) > m.opts.MaxRequestBytes {
		m.result(r, ResultTooLarge)
		problem(w, http.StatusRequestEntityTooLarge, "request too large",
			fmt.Sprintf("requests with an Idempotency-Key are limited to %d bytes", m.opts.MaxRequestBytes))
		return
	}
	x := &exchange{}
	x.body.Reset(body)
	r.Body = &x.body // a Fingerprint hook may read it too
	fpSum, err := m.fingerprint(r, body)
	if err != nil {
		m.result(r, ResultInvalidKey)
		problem(w, http.StatusBadRequest, "unreadable request", err.Error())
		return
	}
	scope, id, fp := requestIDs(scope, auth, key, &fpSum)
	x.op = opkey.Op{ID: id, Key: key, Scope: scope}
	x.attrs = [...]slog.Attr{slog.String("method", r.Method), slog.String("path", r.URL.Path)}
	rec, owner, sent, err := m.claim(r.Context(), x.op.ID, fp, m.opts.WaitForResult, m.opts.MaxWait, x.attrs[:]...)
	switch {
	case err != nil:
		m.result(r, ResultStoreError)
		m.storeError(w, r, "claim", err)
		return
	case rec == nil:
		// ours: run the handler
	case rec.Fingerprint != fp:
		m.result(r, ResultMismatch)
		problem(w, http.StatusUnprocessableEntity, "Idempotency-Key reused",
			"this key was used for a request with a different method, path, query or body")
		return
	case rec.Response != nil:
		m.replayed(r, rec.cached)
		replay(w, rec.Response)
		return
	case r.Context().Err() != nil:
		m.inFlight(w, r, rec, "gave up waiting for the request with this Idempotency-Key")
		return
	default:
		m.inFlight(w, r, rec, "a request with this Idempotency-Key is still being processed; retry later")
		return
	}
	x.fp = fp
	m.run(w, r, next, x, owner, sent)
}

// run executes the handler under owner's claim on op.ID and stores or
// releases the outcome. It counts one result for the request, however it
// ends.
func (m *Middleware) run(w http.ResponseWriter, r *http.Request, next http.Handler, x *exchange, owner string, sent time.Time) {
	res := ResultReleased // what a panic leaves
	defer func() { m.result(r, res) }()
	rec := &x.rec
	defer rec.free()
	var stored *Response
	released, stage, err := m.claims.run(r.Context(), &x.keeper, &x.op, owner, sent, m.tx, m.opts.Retention,
		func(ctx context.Context) (*Response, bool) {
			rec.init(w, m.opts.MaxResponseBytes, m.tx != nil)
			next.ServeHTTP(rec, r.WithContext(ctx))
			if rec.overflow || !terminal(rec.statusCode()) {
				return nil, false
			}
			stored = rec.response(m.opts.ReplayHeader)
			return stored, true
		}, x.attrs[:]...)
	if err == nil && !released {
		m.remember(x.op.ID, x.fp, stored, sent, m.opts.Retention)
	}
	switch {
	case stage == stageBegin || stage == stageCommit:
		res = ResultStoreError
		m.storeError(w, r, stage, err)
		return
	case stage == stageComplete:
		// The effect happened and cannot be undone. The claim is kept (it
		// expires after LockTimeout); the client gets its answer.
		res = ResultStoreError
		m.log(r.Context(), slog.LevelError, "idempotency: store complete failed; the key is held until LockTimeout, then a retry runs the handler again", err, x.attrs[:]...)
	case released && rec.overflow:
		problem(w, http.StatusInternalServerError, "response too large",
			fmt.Sprintf("the response exceeded %d bytes and could not be recorded; nothing was committed", m.opts.MaxResponseBytes))
		return
	case !released:
		res = ResultNew
	}
	rec.send()
}

// replayed tells the hooks of a replay, answered by the cache or the
// store.
func (m *Middleware) replayed(r *http.Request, cached bool) {
	if len(m.hooks) > 0 {
		m.emit(r.Context(), Event{Kind: EventResult, Result: ResultReplayed, Cached: cached, Method: r.Method, Path: r.URL.Path})
	}
}

// result tells the hooks of r's result.
func (m *Middleware) result(r *http.Request, res Result) {
	if len(m.hooks) > 0 {
		m.emit(r.Context(), Event{Kind: EventResult, Result: res, Method: r.Method, Path: r.URL.Path})
	}
}

// terminal reports whether a status is a final answer worth replaying:
// 2xx, and 4xx other than the ones that ask for the request again later
// (408, 409, 425 Too Early, 429), which a replay would repeat forever.
func terminal(status int) bool {
	switch {
	case status >= 200 && status < 300:
		return true
	case status == http.StatusRequestTimeout, status == http.StatusConflict, status == http.StatusTooEarly, status == http.StatusTooManyRequests:
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
		h[k] = slices.Clip(v) // shared with a cached record: an Add must not write into it
	}
	h.Set(HeaderReplayed, "true")
	w.WriteHeader(resp.Status)
	w.Write(resp.Body)
}

// inFlight answers 409: the key's first request is still running. Its
// Retry-After is how long the claim may still hold: when a process that
// died with it stops blocking the key.
func (m *Middleware) inFlight(w http.ResponseWriter, r *http.Request, rec *Record, detail string) {
	m.result(r, ResultInFlight)
	secs := int64(1)
	if !rec.Expires.IsZero() {
		if d := time.Until(rec.Expires); d > time.Second {
			secs = int64((d + time.Second - 1) / time.Second)
		}
	}
	w.Header().Set("Retry-After", strconv.FormatInt(secs, 10))
	problem(w, http.StatusConflict, "request in progress", detail)
}

// storeError answers a request the store failed, after logging why.
func (m *Middleware) storeError(w http.ResponseWriter, r *http.Request, op string, err error) {
	m.log(r.Context(), slog.LevelError, "idempotency: store "+op+" failed", err, reqAttrs(r)...)
	w.Header().Set("Retry-After", "1")
	problem(w, http.StatusServiceUnavailable, "idempotency store unavailable",
		"the request was not processed; retry later")
}

// reqAttrs names a request in logs: method and path, never the key.
func reqAttrs(r *http.Request) []slog.Attr {
	return []slog.Attr{slog.String("method", r.Method), slog.String("path", r.URL.Path)}
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

// newOwner returns a token naming one request's claim: 128 random bits,
// unique across processes without coordination.
func newOwner() string {
	var b [16]byte
	for i := 0; i < 16; i += 8 {
		v := rand.Uint64()
		for j := range 8 {
			b[i+j] = byte(v >> (8 * j))
		}
	}
	return hex.EncodeToString(b[:])
}

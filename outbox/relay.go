package outbox

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/retryhttp/retryhttp"
	"github.com/retryhttp/retryhttp/internal/backoff"
)

// RelayOptions configure a Relay. Each zero field takes the default in its
// comment.
type RelayOptions struct {
	// Outbox is the table to deliver from. Required.
	Outbox *Outbox
	// Client sends each delivery. nil means an http.Client over a
	// retryhttp.Transport that sends each delivery once (the relay is the
	// retry layer: its Policy spaces the deliveries), with a 30 s timeout.
	// A Client's timeout must be shorter than Lease.
	Client *http.Client
	// Policy spaces the deliveries of one message and bounds them: the wait
	// before delivery n+1 is the Policy's backoff for retry n (a Retry-After
	// from the receiver, if longer, wins), and after MaxAttempts failed
	// deliveries the message is dead. Each zero field takes the relay's
	// default: MaxAttempts DefaultMaxDeliveries, BaseDelay 1s, MaxDelay 5m,
	// FullJitter.
	Policy retryhttp.Policy
	// Batch is how many messages one round leases and delivers at once. 0
	// means DefaultBatch.
	Batch int
	// Lease is how long a leased message belongs to this relay: if the
	// relay dies mid-delivery, another delivers it again, with the same
	// key, after this. 0 means DefaultLease.
	Lease time.Duration
	// PollInterval is how often the relay looks for due messages when no
	// notification wakes it (retries that came due, a lost notification).
	// 0 means DefaultPollInterval.
	PollInterval time.Duration
	// Metrics, if set, counts deliveries (see NewMetrics).
	Metrics *Metrics
	// Logger gets delivery failures and database errors; nil means
	// slog.Default().
	Logger *slog.Logger
}

// Defaults of RelayOptions.
const (
	DefaultMaxDeliveries = 10
	DefaultBatch         = 32
	DefaultLease         = time.Minute
	DefaultPollInterval  = time.Second
	defaultBaseDelay     = time.Second
	defaultMaxDelay      = 5 * time.Minute
	defaultClientTimeout = 30 * time.Second
)

// Relay delivers an outbox's messages. Run it in as many processes as you
// like; it starts goroutines only inside Run, and they end with it.
type Relay struct {
	o RelayOptions

	lease, delivered, retry, dead string
}

// NewRelay validates o and returns a Relay.
func NewRelay(o RelayOptions) (*Relay, error) {
	switch {
	case o.Outbox == nil:
		return nil, errors.New("outbox: NewRelay: nil Outbox")
	case o.Batch < 0:
		return nil, fmt.Errorf("outbox: NewRelay: Batch %d is negative", o.Batch)
	case o.Lease < 0:
		return nil, fmt.Errorf("outbox: NewRelay: Lease %v is negative", o.Lease)
	case o.PollInterval < 0:
		return nil, fmt.Errorf("outbox: NewRelay: PollInterval %v is negative", o.PollInterval)
	}
	if err := o.Policy.Validate(); err != nil {
		return nil, fmt.Errorf("outbox: NewRelay: %w", err)
	}
	if o.Policy.MaxAttempts == 0 {
		o.Policy.MaxAttempts = DefaultMaxDeliveries
	}
	if o.Policy.BaseDelay == 0 {
		o.Policy.BaseDelay = defaultBaseDelay
	}
	if o.Policy.MaxDelay == 0 {
		o.Policy.MaxDelay = defaultMaxDelay
	}
	if o.Batch == 0 {
		o.Batch = DefaultBatch
	}
	if o.Lease == 0 {
		o.Lease = DefaultLease
	}
	if o.PollInterval == 0 {
		o.PollInterval = DefaultPollInterval
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Client == nil {
		o.Client = &http.Client{
			Transport: &retryhttp.Transport{Policy: retryhttp.Policy{MaxAttempts: 1}},
			Timeout:   defaultClientTimeout,
		}
	}
	if o.Client.Timeout >= o.Lease {
		return nil, fmt.Errorf("outbox: NewRelay: the Client's timeout %v must be shorter than Lease %v, or a slow delivery's message is delivered again while it runs", o.Client.Timeout, o.Lease)
	}
	t := quote(o.Outbox.table)
	return &Relay{
		o: o,
		// Lease a batch: the due messages no other relay holds, their
		// delivery counted and their due time pushed past the lease, all in
		// one statement.
		lease: `UPDATE ` + t + ` SET next_at = now() + $2 * interval '1 microsecond', deliveries = deliveries + 1
WHERE id IN (SELECT id FROM ` + t + ` WHERE status = 'pending' AND next_at <= now()
	ORDER BY next_at LIMIT $1 FOR UPDATE SKIP LOCKED)
RETURNING id, method, url, header, body, deliveries`,
		// A batch's deliveries are recorded in one statement: one commit,
		// one WAL flush, however many messages.
		delivered: `UPDATE ` + t + ` AS m SET status = 'delivered', delivered_at = now(), last_status = d.code, last_error = NULL
FROM unnest($1::text[], $2::integer[]) AS d(id, code)
WHERE m.id = d.id AND m.status = 'pending'`,
		retry: `UPDATE ` + t + ` SET next_at = now() + $2 * interval '1 microsecond', last_status = $3, last_error = $4
WHERE id = $1 AND status = 'pending' AND deliveries = $5`,
		dead: `UPDATE ` + t + ` SET status = 'dead', last_status = $2, last_error = $3
WHERE id = $1 AND status = 'pending' AND deliveries = $4`,
	}, nil
}

// Run delivers messages until ctx is done, and then returns ctx's error,
// once its deliveries under way have ended (a delivery cut short is
// delivered again after its lease). Database errors are logged and
// retried; Run does not stop on them.
func (r *Relay) Run(ctx context.Context) error {
	wake := make(chan struct{}, 1)
	var wg sync.WaitGroup
	wg.Go(func() { r.listen(ctx, wake) })
	defer wg.Wait()
	fails := 0
	for {
		n, err := r.round(ctx)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		wait := r.o.PollInterval
		switch {
		case err != nil:
			fails++
			r.o.Logger.LogAttrs(ctx, slog.LevelError, "outbox: relay round failed", slog.String("error", err.Error()))
			wait = min(wait, time.Duration(fails)*100*time.Millisecond)
		case n == r.o.Batch:
			fails = 0
			continue // a full batch: more are likely due
		default:
			fails = 0
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-wake:
			t.Stop()
		case <-t.C:
		}
	}
}

// listen wakes the relay when a message is committed. It holds one
// connection of the pool for LISTEN, and reconnects after an error; while
// it is down, polling delivers.
func (r *Relay) listen(ctx context.Context, wake chan<- struct{}) {
	wait := 100 * time.Millisecond
	for ctx.Err() == nil {
		if err := r.listenOnce(ctx, wake); err != nil && ctx.Err() == nil {
			r.o.Logger.LogAttrs(ctx, slog.LevelWarn, "outbox: LISTEN connection lost; polling until it is back", slog.String("error", err.Error()))
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		wait = min(2*wait, 5*time.Second)
	}
}

func (r *Relay) listenOnce(ctx context.Context, wake chan<- struct{}) error {
	pc, err := r.o.Outbox.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	conn := pc.Hijack() // LISTEN stays with the connection: never give it back to the pool
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{r.o.Outbox.channel}.Sanitize()); err != nil {
		return err
	}
	select { // catch up with what was committed before we listened
	case wake <- struct{}{}:
	default:
	}
	for {
		if _, err := conn.WaitForNotification(ctx); err != nil {
			return err
		}
		select {
		case wake <- struct{}{}:
		default:
		}
	}
}

// leased is a message this relay holds for one delivery.
type leased struct {
	id, method, url string
	header          http.Header
	body            []byte
	deliveries      int
}

// round leases a batch, delivers it concurrently and records each outcome.
// It returns the batch's size.
func (r *Relay) round(ctx context.Context) (int, error) {
	rows, err := r.o.Outbox.pool.Query(ctx, r.lease, r.o.Batch, r.o.Lease.Microseconds())
	if err != nil {
		return 0, fmt.Errorf("outbox: lease: %w", err)
	}
	var batch []leased
	for rows.Next() {
		var m leased
		var header []byte
		if err := rows.Scan(&m.id, &m.method, &m.url, &header, &m.body, &m.deliveries); err != nil {
			rows.Close()
			return 0, fmt.Errorf("outbox: lease: %w", err)
		}
		if err := json.Unmarshal(header, &m.header); err != nil {
			m.header = nil // delivered without; the header was written by Enqueue, so this does not happen
		}
		batch = append(batch, m)
	}
	if err := rows.Err(); err != nil {
		return 0, fmt.Errorf("outbox: lease: %w", err)
	}
	codes := make([]int32, len(batch)) // the 2xx of each delivered message, 0 otherwise
	var wg sync.WaitGroup
	for i, m := range batch {
		wg.Go(func() { codes[i] = int32(r.deliver(ctx, m)) })
	}
	wg.Wait()
	var ids []string
	var okCodes []int32
	for i, c := range codes {
		if c != 0 {
			ids, okCodes = append(ids, batch[i].id), append(okCodes, c)
		}
	}
	if len(ids) > 0 {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if _, err := r.o.Outbox.pool.Exec(rctx, r.delivered, ids, okCodes); err != nil {
			// The outcomes are lost; the leases bring the messages back, and
			// the receiver's idempotency layer recognises the deliveries.
			return len(batch), fmt.Errorf("outbox: recording deliveries: %w", err)
		}
		r.o.Metrics.add(r.o.Outbox, outcomeDelivered, len(ids))
	}
	return len(batch), nil
}

// deliver sends one message. It returns the receiver's status when the
// message was delivered, for the batch's record, and otherwise records the
// failure itself and returns 0.
func (r *Relay) deliver(ctx context.Context, m leased) int {
	req, err := http.NewRequestWithContext(ctx, m.method, m.url, bytes.NewReader(m.body))
	if err != nil {
		r.record(ctx, m, r.dead, 0, err) // the URL cannot be sent: no delivery will do
		return 0
	}
	for k, v := range m.header {
		req.Header[k] = v
	}
	if req.Header.Get(retryhttp.HeaderIdempotencyKey) == "" && req.Header.Get(retryhttp.HeaderXIdempotencyKey) == "" {
		req.Header.Set(retryhttp.HeaderIdempotencyKey, m.id)
	}
	resp, err := r.o.Client.Do(req)
	if ctx.Err() != nil {
		if err == nil {
			resp.Body.Close()
		}
		return 0 // stopped: the lease hands the message to the next relay, or this one later
	}
	if err != nil {
		r.record(ctx, m, r.retry, 0, err)
		return 0
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	switch code := resp.StatusCode; {
	case code >= 200 && code < 300:
		return code
	case code == 408 || code == 409 || code == 425 || code == 429 || code >= 500 || code < 200:
		r.record(ctx, m, r.retry, code, nil, retryAfter(resp.Header.Get("Retry-After")))
	default: // a refusal for good (400, 404, 422, ...), or a redirect not followed
		r.record(ctx, m, r.dead, code, fmt.Errorf("the receiver answered %d", code))
	}
	return 0
}

// record stores a failed delivery: retried later, or, past MaxAttempts
// deliveries or refused for good, dead.
func (r *Relay) record(ctx context.Context, m leased, stmt string, code int, cause error, atLeast ...time.Duration) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	var status *int
	if code != 0 {
		status = &code
	}
	var lastErr *string
	if cause != nil {
		s := cause.Error()
		lastErr = &s
	}
	var err error
	switch {
	case stmt == r.retry && m.deliveries < r.o.Policy.MaxAttempts:
		wait := backoff.Delay(backoff.Jitter(r.o.Policy.Jitter), r.o.Policy.BaseDelay, r.o.Policy.MaxDelay, m.deliveries-1, 0, rand.Float64())
		for _, d := range atLeast {
			wait = max(wait, d)
		}
		if lastErr == nil {
			s := fmt.Sprintf("the receiver answered %d", code)
			lastErr = &s
		}
		_, err = r.o.Outbox.pool.Exec(ctx, stmt, m.id, wait.Microseconds(), status, lastErr, m.deliveries)
		r.o.Metrics.add(r.o.Outbox, outcomeRetried, 1)
	default:
		if lastErr == nil {
			s := fmt.Sprintf("the receiver answered %d", code)
			lastErr = &s
		}
		_, err = r.o.Outbox.pool.Exec(ctx, r.dead, m.id, status, lastErr, m.deliveries)
		r.o.Metrics.add(r.o.Outbox, outcomeDead, 1)
		r.o.Logger.LogAttrs(ctx, slog.LevelError, "outbox: message is dead", slog.String("id", m.id),
			slog.String("url", m.url), slog.Int("deliveries", m.deliveries), slog.String("error", *lastErr))
	}
	if err != nil {
		// The outcome is lost; the lease brings the message back, and the
		// receiver's idempotency layer recognises the delivery.
		r.o.Logger.LogAttrs(ctx, slog.LevelError, "outbox: recording a delivery failed", slog.String("id", m.id), slog.String("error", err.Error()))
	}
}

// retryAfter reads a Retry-After of delta-seconds or an HTTP-date.
func retryAfter(v string) time.Duration {
	if v == "" {
		return 0
	}
	if secs, err := strconv.Atoi(v); err == nil && secs > 0 {
		return time.Duration(secs) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(0, time.Until(t))
	}
	return 0
}

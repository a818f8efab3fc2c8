package outbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/retryhttp/retryhttp"
	"github.com/retryhttp/retryhttp/queue"
)

// RelayOptions configure a Relay. Each zero field takes the default in its
// comment.
type RelayOptions struct {
	// Outbox is the table to deliver from. Required.
	Outbox *Outbox
	// Client sends each http and https delivery. nil means an
	// http.Client over a retryhttp.Transport that sends each delivery once
	// (the relay is the retry layer: its Backoff spaces the deliveries),
	// keeps Batch idle connections per host, and times out after 30 s or
	// half the Lease, whichever is shorter, so that any Lease works with
	// it. A Client's timeout must be shorter than Lease.
	Client *http.Client
	// Senders deliver the messages whose URL has another scheme than
	// http and https, by scheme ("nats", "amqp", ...; see Sender). A
	// message whose scheme has no Sender here is dead at its first
	// delivery, the reason in its LastError: no later delivery of this
	// relay could send it (give every relay of a fleet the same Senders).
	// Each Send is bounded by Lease.
	Senders map[string]Sender
	// MaxDeliveries bounds the deliveries of one message: after that many
	// failed, the message is dead. 0 means DefaultMaxDeliveries.
	MaxDeliveries int
	// Backoff spaces the deliveries of one message: the wait after failed
	// delivery n is Backoff.Wait(n). The zero Backoff waits up to 1 s,
	// then 2 s, ... up to 1 min, with full jitter; with
	// DefaultMaxDeliveries a message outlives a receiver's outage of
	// about 4.5 min on average, 9 min at most (14 waits).
	Backoff queue.Backoff
	// MaxRetryAfter is the longest wait a receiver may ask for: its own
	// wait (Retry-After, or a rate-limit header, read by
	// retryhttp.ServerWait) wins over the Backoff's when it is longer and
	// at most MaxRetryAfter; a longer one is not honoured: the delivery
	// counts as failed and backs off by the Backoff, so a receiver cannot
	// park a message for years. 0 means the Backoff's Max.
	MaxRetryAfter time.Duration
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
	// Hooks are told each delivery's outcome, in order (see Hook).
	// Prometheus metrics are one: put a *Metrics (NewMetrics) here.
	Hooks []Hook
	// Logger gets delivery failures and database errors; nil means
	// slog.Default().
	Logger *slog.Logger
}

// Defaults of RelayOptions.
const (
	DefaultMaxDeliveries = 15
	DefaultBatch         = 32
	DefaultLease         = time.Minute
	DefaultPollInterval  = time.Second
	defaultClientTimeout = 30 * time.Second
)

// Relay delivers an outbox's messages. Run it in as many processes as you
// like; it starts goroutines only inside Run, and they end with it.
type Relay struct {
	o       RelayOptions
	senders map[string]Sender // by scheme, http and https included
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
	case o.MaxDeliveries < 0:
		return nil, fmt.Errorf("outbox: NewRelay: MaxDeliveries %d is negative", o.MaxDeliveries)
	case o.MaxRetryAfter < 0:
		return nil, fmt.Errorf("outbox: NewRelay: MaxRetryAfter %v is negative", o.MaxRetryAfter)
	}
	if err := o.Backoff.Validate(); err != nil {
		return nil, fmt.Errorf("outbox: NewRelay: %w", err)
	}
	if o.MaxDeliveries == 0 {
		o.MaxDeliveries = DefaultMaxDeliveries
	}
	if o.MaxRetryAfter == 0 {
		o.MaxRetryAfter = o.Backoff.MaxWait()
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
		// Up to Batch deliveries run at once, often to one receiver: keep
		// as many connections to it idle, where http.DefaultTransport keeps
		// 2 and would dial the rest anew for every batch. A DefaultTransport
		// replaced by the process (a proxy, a test double) is used as it is.
		var base http.RoundTripper
		if dt, ok := http.DefaultTransport.(*http.Transport); ok {
			own := dt.Clone()
			own.MaxIdleConnsPerHost = o.Batch
			base = own
		}
		o.Client = &http.Client{
			// The relay logs its deliveries' failures itself.
			Transport: &retryhttp.Transport{Base: base, Policy: retryhttp.Policy{MaxAttempts: 1}, Logger: slog.New(slog.DiscardHandler)},
			Timeout:   min(defaultClientTimeout, o.Lease/2),
		}
	}
	if o.Client.Timeout >= o.Lease {
		return nil, fmt.Errorf("outbox: NewRelay: the Client's timeout %v must be shorter than Lease %v, or a slow delivery's message is delivered again while it runs", o.Client.Timeout, o.Lease)
	}
	senders := map[string]Sender{}
	for scheme, s := range o.Senders {
		switch {
		case s == nil:
			return nil, fmt.Errorf("outbox: NewRelay: nil Sender for scheme %q", scheme)
		case scheme == "http" || scheme == "https":
			return nil, fmt.Errorf("outbox: NewRelay: scheme %q is the Client's; set Client to change how it is sent", scheme)
		case scheme == "" || scheme != strings.ToLower(scheme):
			return nil, fmt.Errorf("outbox: NewRelay: scheme %q: Senders are keyed by lower-case scheme, as URLs are parsed", scheme)
		}
		senders[scheme] = s
	}
	web := httpSender{client: o.Client}
	senders["http"], senders["https"] = web, web
	return &Relay{o: o, senders: senders}, nil
}

// Run delivers messages until ctx is done, and then returns ctx's error,
// once its deliveries under way have ended (a delivery cut short is
// delivered again after its lease). Database errors are logged and
// retried; Run does not stop on them.
//
// Up to Batch deliveries run at once, each with the Client's own timeout:
// a receiver that hangs holds one of them, not the others. A slot that
// frees is filled by the next lease.
func (r *Relay) Run(ctx context.Context) error {
	wake := make(chan struct{}, 1)
	freed := make(chan struct{}, 1)
	done := make(chan deliveredMsg, r.o.Batch)
	var wg, deliveries sync.WaitGroup
	wg.Go(func() { r.listen(ctx, wake) })
	wg.Go(func() { r.recordDelivered(ctx, done) })
	defer func() {
		deliveries.Wait()
		close(done)
		wg.Wait()
	}()
	var inFlight atomic.Int32
	fails := 0
	backlog := false // the last lease was full: more are likely due
	for {
		if free := r.o.Batch - int(inFlight.Load()); free > 0 {
			batch, err := r.lease(ctx, free)
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if err != nil {
				fails++
				r.o.Logger.LogAttrs(ctx, slog.LevelError, "outbox: relay lease failed", slog.String("error", err.Error()))
			} else {
				fails = 0
			}
			backlog = err == nil && len(batch) == free
			for _, m := range batch {
				inFlight.Add(1)
				deliveries.Go(func() {
					defer func() {
						inFlight.Add(-1)
						select {
						case freed <- struct{}{}:
						default:
						}
					}()
					if code := r.deliver(ctx, m); code != 0 {
						done <- deliveredMsg{id: m.id, code: int32(code)}
					}
				})
			}
		}
		wait := r.o.PollInterval
		if fails > 0 {
			wait = min(wait, time.Duration(fails)*100*time.Millisecond)
		}
		t := time.NewTimer(wait)
	waiting:
		for {
			select {
			case <-ctx.Done():
				t.Stop()
				return ctx.Err()
			case <-wake:
				break waiting
			case <-t.C:
				break waiting
			case <-freed:
				// Slots for the messages still due: lease when half the batch
				// is free, not a statement per message that ends.
				if backlog && r.o.Batch-int(inFlight.Load()) >= (r.o.Batch+1)/2 {
					break waiting
				}
			}
		}
		t.Stop()
	}
}

// deliveredMsg is a delivery the receiver accepted, to be recorded.
type deliveredMsg struct {
	id   string
	code int32
}

// recordDelivered writes the accepted deliveries, as many as have arrived
// in one statement: one commit, one WAL flush, however many messages. A
// write that fails (the database restarting) is tried again until it
// succeeds or a lease has passed, so that a message delivered meanwhile is
// not delivered again when its lease expires; past the lease another relay
// may deliver it again, and the receiver's idempotency layer recognises
// it. It returns when done is closed and drained.
func (r *Relay) recordDelivered(ctx context.Context, done <-chan deliveredMsg) {
	bg := context.WithoutCancel(ctx)
	var ids []string
	var codes []int32
	for m := range done {
		ids, codes = append(ids[:0], m.id), append(codes[:0], m.code)
	more:
		for len(ids) < 1024 {
			select {
			case m, ok := <-done:
				if !ok {
					break more
				}
				ids, codes = append(ids, m.id), append(codes, m.code)
			default:
				break more
			}
		}
		deadline := time.Now().Add(r.o.Lease)
		for pause := 50 * time.Millisecond; ; pause = min(2*pause, time.Second) {
			wctx, cancel := context.WithTimeout(bg, 10*time.Second)
			err := r.o.Outbox.db.delivered(wctx, ids, codes)
			cancel()
			if err == nil {
				for i, id := range ids {
					r.tell(bg, Event{Kind: EventDelivered, ID: id, Status: int(codes[i])})
				}
				break
			}
			if time.Now().Add(pause).After(deadline) {
				r.o.Logger.LogAttrs(bg, slog.LevelError, "outbox: recording deliveries failed; their leases will bring them back",
					slog.Int("messages", len(ids)), slog.String("error", err.Error()))
				break
			}
			r.o.Logger.LogAttrs(bg, slog.LevelWarn, "outbox: recording deliveries failed; trying again", slog.String("error", err.Error()))
			time.Sleep(pause)
		}
	}
}

// listen wakes the relay when a message is committed, where the database
// tells (PostgreSQL's LISTEN/NOTIFY), and reconnects after an error; while
// it is down, and on a database that does not tell, polling delivers.
func (r *Relay) listen(ctx context.Context, wake chan<- struct{}) {
	signal := func() {
		select {
		case wake <- struct{}{}:
		default:
		}
	}
	wait := 100 * time.Millisecond
	for ctx.Err() == nil {
		err := r.o.Outbox.db.listen(ctx, signal)
		if errors.Is(err, errNoNotifications) {
			return
		}
		if err != nil && ctx.Err() == nil {
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

// errNoNotifications is a database's listen on a database that cannot
// tell of commits.
var errNoNotifications = errors.New("outbox: the database sends no notifications")

// leased is a message this relay holds for one delivery.
type leased struct {
	id, method, url string
	header          http.Header
	body            []byte
	deliveries      int
}

// lease takes up to n due messages for this relay.
func (r *Relay) lease(ctx context.Context, n int) ([]leased, error) {
	batch, err := r.o.Outbox.db.lease(ctx, n, r.o.Lease)
	if err != nil {
		return nil, fmt.Errorf("outbox: lease: %w", err)
	}
	return batch, nil
}

// parseHeader reads a message's header as Enqueue wrote it.
func parseHeader(b []byte) http.Header {
	var h http.Header
	if err := json.Unmarshal(b, &h); err != nil {
		return nil // delivered without; the header was written by Enqueue, so this does not happen
	}
	return h
}

// deliver sends one message through the Sender of its URL's scheme. It
// returns the destination's status (200 if it has none) when the message
// was delivered, for the batch's record, and otherwise records the
// failure itself and returns 0.
func (r *Relay) deliver(ctx context.Context, m leased) int {
	u, err := url.Parse(m.url)
	if err != nil {
		r.record(ctx, m, Result{Err: redactErr(err, m.url), Final: true}) // the URL cannot be sent: no delivery will do
		return 0
	}
	s, ok := r.senders[u.Scheme]
	if !ok {
		// No delivery of this relay can send it: dead now, not after
		// MaxDeliveries deliveries and their backoff.
		r.record(ctx, m, Result{Err: errNoSender(u.Scheme), Final: true})
		return 0
	}
	sctx, cancel := context.WithTimeout(ctx, r.o.Lease)
	res := s.Send(sctx, Delivery{ID: m.id, Method: m.method, URL: u, Header: deliveryHeader(m.header, m.id), Body: m.body, Deliveries: m.deliveries})
	cancel()
	if ctx.Err() != nil {
		return 0 // stopped: the lease hands the message to the next relay, or this one later
	}
	if res.Err == nil {
		if res.Status == 0 {
			return http.StatusOK
		}
		return res.Status
	}
	res.Err = redactErr(res.Err, m.url)
	r.record(ctx, m, res)
	return 0
}

// record stores a failed delivery: retried later, or, past MaxDeliveries
// deliveries or refused for good, dead.
func (r *Relay) record(ctx context.Context, m leased, res Result) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	var status *int
	if res.Status != 0 {
		status = &res.Status
	}
	lastErr := res.Err.Error()
	var err error
	e := Event{ID: m.id, URL: redactURL(m.url), Status: res.Status, Deliveries: m.deliveries, Err: res.Err}
	if !res.Final && m.deliveries < r.o.MaxDeliveries {
		wait := r.o.Backoff.Wait(m.deliveries, rand.Float64())
		if res.Wait <= r.o.MaxRetryAfter {
			wait = max(wait, res.Wait)
		}
		err = r.o.Outbox.db.retry(ctx, failure{m.id, status, lastErr, m.deliveries}, wait)
		e.Kind = EventRetried
		r.tell(ctx, e)
	} else {
		err = r.o.Outbox.db.dead(ctx, failure{m.id, status, lastErr, m.deliveries})
		e.Kind = EventDead
		r.tell(ctx, e)
		r.o.Logger.LogAttrs(ctx, slog.LevelError, "outbox: message is dead", slog.String("id", m.id),
			slog.String("url", redactURL(m.url)), slog.Int("deliveries", m.deliveries), slog.String("error", lastErr))
	}
	if err != nil {
		// The outcome is lost; the lease brings the message back, and the
		// receiver's idempotency layer recognises the delivery.
		r.o.Logger.LogAttrs(ctx, slog.LevelError, "outbox: recording a delivery failed", slog.String("id", m.id), slog.String("error", err.Error()))
	}
}

// redactURL is u as logs and last_error show it: no query string and no
// user information, which may carry tokens, as the Transport never logs
// them either.
func redactURL(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return "(unparsable URL)"
	}
	p.User, p.RawQuery, p.ForceQuery, p.Fragment, p.RawFragment = nil, "", false, "", ""
	return p.String()
}

// redactErr is err with the message's URL redacted: http.Client's
// *url.Error quotes it (the password masked, the query whole).
func redactErr(err error, u string) error {
	if ue, ok := err.(*url.Error); ok {
		c := *ue
		c.URL = redactURL(ue.URL)
		return &c
	}
	if r := redactURL(u); r != u {
		return errors.New(strings.ReplaceAll(err.Error(), u, r))
	}
	return err
}

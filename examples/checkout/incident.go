package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/retryhttp/retryhttp"
	"github.com/retryhttp/retryhttp/idempotency"
	"github.com/retryhttp/retryhttp/idempotency/pgstore"
	"github.com/retryhttp/retryhttp/idempotency/redisstore"
	"github.com/retryhttp/retryhttp/outbox"
	"github.com/retryhttp/retryhttp/queue"
)

// Config is one run of the incident.
type Config struct {
	Orders      int
	Concurrency int
	// Pieces turns on the cross-layer pieces: keys derived from the inbound
	// request for the provider call, and the receipt email through the
	// transactional outbox. Without them every layer is still correct on
	// its own: the client SDK retries with one key, the checkout and the
	// provider run the idempotency middleware, every call goes through a
	// retryhttp.Transport.
	Pieces bool
	// Faults, at every hop.
	DropClient   float64       // client ← checkout: the checkout committed, the answer is lost
	Crash        float64       // the checkout dies between the provider call and its own commit
	DropProvider float64       // checkout ← provider: the provider charged, the answer is lost
	DropMail     float64       // relay or checkout ← mail: the mail went out, the answer is lost
	Flicker      time.Duration // the provider answers 503 for this long (its 30 s flicker, compressed)
	RelayCrashes time.Duration // the relay is killed (its context cut mid-delivery) this often
	// ConsumerKills: the fulfilment consumer, a process of its own, is
	// killed with SIGKILL about this often (up to twice it) and started
	// again; 0 runs the third layer without it.
	ConsumerKills time.Duration
	DropShipping  float64 // consumer ← shipping: shipped, the answer lost
	Seed          uint64

	Pool      *pgxpool.Pool
	Redis     *redis.Client
	RedisAddr string // for the consumer processes
	NATS      string // NATS with JetStream for the third layer
	Kafka     string // a Kafka broker for the third layer instead; with neither, it is left out
}

// Result counts the effects per order.
type Result struct {
	Orders, Failed                    int // orders, and orders whose client got no 201
	FailedWhy                         []string
	Charges, ChargeDups, ChargeMissed int // charges made; orders charged more than once; succeeded orders not charged
	Emails, EmailDups, EmailMissed    int
	Shipments, ShipDups, ShipMissed   int // the third layer's; zero without it
	ConsumersKilled                   int
	ProviderCalls                     int // requests the provider saw
}

// ExactlyOnce reports whether every order was charged, mailed and (with
// the third layer) shipped once, and nothing more.
func (r Result) ExactlyOnce(thirdLayer bool) bool {
	ok := r.Failed == 0 && r.ChargeDups == 0 && r.ChargeMissed == 0 && r.EmailDups == 0 && r.EmailMissed == 0 &&
		r.Charges == r.Orders && r.Emails == r.Orders
	if thirdLayer {
		ok = ok && r.ShipDups == 0 && r.ShipMissed == 0 && r.Shipments == r.Orders
	}
	return ok
}

// counter counts effects per order.
type counter struct {
	mu sync.Mutex
	n  map[int]int
}

func (c *counter) add(order int) {
	c.mu.Lock()
	if c.n == nil {
		c.n = map[int]int{}
	}
	c.n[order]++
	c.mu.Unlock()
}

func (c *counter) get() map[int]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[int]int, len(c.n))
	for k, v := range c.n {
		out[k] = v
	}
	return out
}

type orderBody struct {
	Order int `json:"order"`
}

func readOrder(r *http.Request) int {
	var b orderBody
	json.NewDecoder(r.Body).Decode(&b)
	return b.Order
}

// chance is a goroutine-safe coin with a seed.
type chance struct {
	mu  sync.Mutex
	rng *rand.Rand
}

func (c *chance) float() float64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.rng.Float64()
}

func (c *chance) hit(p float64) bool {
	if p <= 0 {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.rng.Float64() < p
}

// dropAfter runs h, and then, with probability p, cuts the connection
// instead of answering: the work is done, the caller never hears.
func dropAfter(h http.Handler, p float64, coin *chance) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !coin.hit(p) {
			h.ServeHTTP(w, r)
			return
		}
		h.ServeHTTP(httptest.NewRecorder(), r)
		if c, _, err := http.NewResponseController(w).Hijack(); err == nil {
			c.Close()
			return
		}
		panic(http.ErrAbortHandler)
	})
}

var quiet = slog.New(slog.DiscardHandler)

// Run plays the incident once.
func Run(ctx context.Context, cfg Config) (Result, error) {
	coin := &chance{rng: rand.New(rand.NewPCG(cfg.Seed, 7))}
	suffix := fmt.Sprintf("%d_%d", time.Now().UnixNano(), cfg.Seed)

	// The payment provider: the idempotency middleware on Redis, a flicker
	// of 503s, answers lost after the charge.
	var charges counter
	var providerCalls atomic.Int64
	var flickerFrom, flickerTo atomic.Int64
	// The demo's keys live only as long as the demo: its Redis need not
	// persist them, so the store's warning about that is not shown.
	provStore, err := redisstore.New(cfg.Redis, redisstore.Options{Prefix: "checkout-demo:" + suffix + ":", Logger: quiet})
	if err != nil {
		return Result{}, err
	}
	provMW, err := idempotency.New(idempotency.Options{Store: provStore, Logger: quiet})
	if err != nil {
		return Result{}, err
	}
	provider := httptest.NewServer(dropAfter(provMW.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		now := time.Now().UnixNano()
		if now >= flickerFrom.Load() && now < flickerTo.Load() {
			w.Header().Set("Retry-After", "0")
			http.Error(w, "flicker", http.StatusServiceUnavailable)
			return
		}
		charges.add(readOrder(r))
		w.WriteHeader(http.StatusCreated)
	})), cfg.DropProvider, coin))
	defer provider.Close()

	// The mail service: the idempotency middleware, answers lost after the
	// mail went out.
	var emails counter
	mailMW, err := idempotency.New(idempotency.Options{Logger: quiet})
	if err != nil {
		return Result{}, err
	}
	mail := httptest.NewServer(dropAfter(mailMW.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		emails.add(readOrder(r))
		w.WriteHeader(http.StatusAccepted)
	})), cfg.DropMail, coin))
	defer mail.Close()

	// The third layer: "order placed" on a stream (NATS) or topic
	// (Kafka) of the run's own, and the shipping provider the fulfilment
	// consumer calls, behind the idempotency middleware, flickering like
	// the payment provider.
	var shipments counter
	var shipping *httptest.Server
	ev, err := openEvents(ctx, cfg, suffix)
	if err != nil {
		return Result{}, err
	}
	if ev != nil {
		defer ev.close()
		shipMW, err := idempotency.New(idempotency.Options{Logger: quiet})
		if err != nil {
			return Result{}, err
		}
		shipping = httptest.NewServer(dropAfter(shipMW.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			now := time.Now().UnixNano()
			if now >= flickerFrom.Load() && now < flickerTo.Load() {
				http.Error(w, "flicker", http.StatusServiceUnavailable)
				return
			}
			time.Sleep(2 * time.Millisecond) // a shipment takes a moment: a consumer killed now dies mid-message
			shipments.add(readOrder(r))
			w.WriteHeader(http.StatusCreated)
		})), cfg.DropShipping, coin))
		defer shipping.Close()
	}

	// The checkout service: the middleware on PostgreSQL in transactional
	// mode; the provider behind a retryhttp.Transport; the order row, and
	// with the pieces the receipt, in the request's transaction.
	idem, err := pgstore.New(cfg.Pool, "checkout_idem_"+suffix)
	if err != nil {
		return Result{}, err
	}
	box, err := outbox.New(cfg.Pool, "checkout_outbox_"+suffix)
	if err != nil {
		return Result{}, err
	}
	orders := "checkout_orders_" + suffix
	for _, m := range []func(context.Context) error{idem.Migrate, box.Migrate} {
		if err := m(ctx); err != nil {
			return Result{}, err
		}
	}
	if _, err := cfg.Pool.Exec(ctx, "CREATE TABLE "+orders+" (id int PRIMARY KEY)"); err != nil {
		return Result{}, err
	}
	defer func() {
		for _, t := range []string{orders, box.Table(), "checkout_idem_" + suffix} {
			cfg.Pool.Exec(context.WithoutCancel(ctx), "DROP TABLE IF EXISTS "+t)
		}
	}()
	fast := retryhttp.Policy{MaxAttempts: 4, BaseDelay: 10 * time.Millisecond, MaxDelay: 100 * time.Millisecond}
	toProvider := &http.Client{Transport: &retryhttp.Transport{InjectIdempotencyKey: true, Budget: retryhttp.NoBudget, Policy: fast, Logger: quiet,
		Base: countingBase(&providerCalls)}}
	toMail := &http.Client{Transport: &retryhttp.Transport{InjectIdempotencyKey: true, Budget: retryhttp.NoBudget, Policy: fast, Logger: quiet}}
	checkoutMW, err := idempotency.New(idempotency.Options{Store: idem, Transactional: true, Logger: quiet})
	if err != nil {
		return Result{}, err
	}
	post := func(ctx context.Context, c *http.Client, url string, order int) error {
		req, _ := http.NewRequestWithContext(ctx, "POST", url, strings.NewReader(fmt.Sprintf(`{"order":%d}`, order)))
		req.Header.Set("Content-Type", "application/json")
		resp, err := c.Do(req)
		if err != nil {
			return err
		}
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<10))
		resp.Body.Close()
		if resp.StatusCode >= 300 {
			return fmt.Errorf("status %d: %s", resp.StatusCode, strings.TrimSpace(string(body)))
		}
		return nil
	}
	checkout := httptest.NewServer(dropAfter(checkoutMW.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		order := readOrder(r)
		callCtx := r.Context() // the inbound key travels: the provider sees the same key on every run
		if !cfg.Pieces {
			callCtx = context.Background() // as code that drops the request's context: a fresh key per run
		}
		if err := post(callCtx, toProvider, provider.URL+"/v1/charges", order); err != nil {
			http.Error(w, "payment provider: "+err.Error(), http.StatusBadGateway)
			return
		}
		if !cfg.Pieces { // the receipt and the event go out straight away, before the commit
			if err := post(context.Background(), toMail, mail.URL+"/send", order); err != nil {
				http.Error(w, "mail: "+err.Error(), http.StatusBadGateway)
				return
			}
			if ev != nil {
				if err := ev.publish(r.Context(), order); err != nil {
					http.Error(w, "events: "+err.Error(), http.StatusBadGateway)
					return
				}
			}
		}
		if coin.hit(cfg.Crash) {
			panic(http.ErrAbortHandler) // dies before its commit: the transaction rolls back, the claim is freed
		}
		tx, err := pgstore.Tx(r.Context())
		if err == nil {
			_, err = tx.Exec(r.Context(), "INSERT INTO "+orders+" (id) VALUES ($1)", order)
		}
		if err == nil && cfg.Pieces {
			_, err = box.Enqueue(r.Context(), tx, outbox.Message{URL: mail.URL + "/send", Body: []byte(fmt.Sprintf(`{"order":%d}`, order)),
				Header: http.Header{"Content-Type": {"application/json"}}})
		}
		if err == nil && cfg.Pieces && ev != nil { // "order placed", sent by the relay with its ID as the broker's message ID
			_, err = box.Enqueue(r.Context(), tx, outbox.Message{URL: ev.url(order), Body: event(order)})
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusCreated)
	})), cfg.DropClient, coin))
	defer checkout.Close()

	// The relay, killed and started again while it works.
	senders := map[string]outbox.Sender{}
	if ev != nil {
		scheme, s, err := ev.sender()
		if err != nil {
			return Result{}, err
		}
		senders[scheme] = s
	}
	relayCtx, stopRelays := context.WithCancel(ctx)
	var relays sync.WaitGroup
	if cfg.Pieces {
		relays.Go(func() {
			for relayCtx.Err() == nil {
				r, err := outbox.NewRelay(outbox.RelayOptions{Outbox: box, Lease: time.Second, PollInterval: 20 * time.Millisecond,
					MaxDeliveries: 1000, Backoff: queue.Backoff{Base: 20 * time.Millisecond, Max: 200 * time.Millisecond},
					Senders: senders, Client: &http.Client{Timeout: 500 * time.Millisecond}, Logger: quiet})
				if err != nil {
					panic(err)
				}
				life, kill := context.WithTimeout(relayCtx, cfg.RelayCrashes)
				r.Run(life) // cut mid-delivery: the lease brings its messages back
				kill()
			}
		})
	}

	// The client SDK: its own retries, one key across them (as stripe-go).
	// With one retry layer, the client's retries carry the order through
	// the flicker (the checkout sends each run's provider call once), so
	// its window must outlast the flicker: 30 attempts of up to 500 ms.
	sdk := &http.Client{Transport: &retryhttp.Transport{InjectIdempotencyKey: true, Budget: retryhttp.NoBudget, Logger: quiet,
		Policy: retryhttp.Policy{MaxAttempts: 30, BaseDelay: 50 * time.Millisecond, MaxDelay: 500 * time.Millisecond, MaxElapsed: time.Minute}}}
	start := time.Now()
	flickerFrom.Store(start.Add(300 * time.Millisecond).UnixNano())
	flickerTo.Store(start.Add(300*time.Millisecond + cfg.Flicker).UnixNano())
	// The fulfilment consumers, killed and started again while they work.
	stopFleet := make(chan struct{})
	fleetDone := make(chan error, 1)
	var killed int
	if ev != nil {
		f := fulfilment{Events: ev.args(), Redis: cfg.RedisAddr,
			Prefix: "checkout-fulfilment:" + suffix + ":", Shipping: shipping.URL, Pieces: cfg.Pieces}
		every := cfg.ConsumerKills
		if every == 0 {
			every = time.Hour
		}
		go func() {
			var err error
			killed, err = fleet(stopFleet, f, every, coin, os.Stderr)
			fleetDone <- err
		}()
	} else {
		close(fleetDone)
	}
	failed := atomic.Int64{}
	var whyMu sync.Mutex
	var why []string
	work := make(chan int)
	var clients sync.WaitGroup
	for range cfg.Concurrency {
		clients.Go(func() {
			for order := range work {
				if err := post(ctx, sdk, checkout.URL+"/checkout", order); err != nil {
					failed.Add(1)
					whyMu.Lock()
					why = append(why, fmt.Sprintf("order %d: %v", order, err))
					whyMu.Unlock()
				}
			}
		})
	}
	for order := range cfg.Orders {
		work <- order
	}
	close(work)
	clients.Wait()
	if cfg.Pieces { // wait for the receipts
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			var pending int
			cfg.Pool.QueryRow(ctx, "SELECT count(*) FROM "+box.Table()+" WHERE status <> 'delivered'").Scan(&pending)
			if pending == 0 {
				break
			}
		}
	}
	if ev != nil { // wait for the shipments
		var err error
		for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			var ok bool
			if ok, err = ev.drained(ctx); ok && err == nil {
				break
			}
			if time.Now().After(deadline) {
				err = errNotDrained
				break
			}
		}
		close(stopFleet)
		if ferr := <-fleetDone; ferr != nil {
			err = ferr
		}
		if err != nil {
			stopRelays()
			relays.Wait()
			return Result{}, err
		}
	}
	stopRelays()
	relays.Wait()
	toProvider.CloseIdleConnections()
	toMail.CloseIdleConnections()
	sdk.CloseIdleConnections()

	res := Result{Orders: cfg.Orders, Failed: int(failed.Load()), FailedWhy: why, ProviderCalls: int(providerCalls.Load()), ConsumersKilled: killed}
	var committed []int
	rows, err := cfg.Pool.Query(ctx, "SELECT id FROM "+orders)
	if err != nil {
		return res, err
	}
	for rows.Next() {
		var id int
		rows.Scan(&id)
		committed = append(committed, id)
	}
	c, e := charges.get(), emails.get()
	for _, n := range c {
		res.Charges += n
		if n > 1 {
			res.ChargeDups++
		}
	}
	for _, n := range e {
		res.Emails += n
		if n > 1 {
			res.EmailDups++
		}
	}
	sh := shipments.get()
	for _, n := range sh {
		res.Shipments += n
		if n > 1 {
			res.ShipDups++
		}
	}
	for _, id := range committed {
		if c[id] == 0 {
			res.ChargeMissed++
		}
		if e[id] == 0 {
			res.EmailMissed++
		}
		if ev != nil && sh[id] == 0 {
			res.ShipMissed++
		}
	}
	return res, nil
}

// countingBase counts the requests sent to the provider.
func countingBase(n *atomic.Int64) http.RoundTripper {
	return roundTripFunc(func(r *http.Request) (*http.Response, error) {
		n.Add(1)
		return http.DefaultTransport.RoundTrip(r)
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

package riverjob_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
	"github.com/riverqueue/river/rivertype"
	"go.uber.org/goleak"

	"github.com/retryhttp/retryhttp"
	"github.com/retryhttp/retryhttp/idempotency"
	"github.com/retryhttp/retryhttp/idempotency/pgstore"
	"github.com/retryhttp/retryhttp/queue"
	"github.com/retryhttp/retryhttp/queue/riverjob"
	"github.com/retryhttp/retryhttp/shared/pgtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var quiet = slog.New(slog.DiscardHandler)

// riverSchema gives the test a PostgreSQL pool and a schema of its own
// with River's tables, dropped when the test ends.
func riverSchema(t *testing.T) (*pgxpool.Pool, string) {
	t.Helper()
	ctx := context.Background()
	p := pgtest.Pool(t)
	schema := "river_" + strings.ReplaceAll(uuid.NewString(), "-", "")
	if _, err := p.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE")
	})
	m, err := rivermigrate.New(riverpgxv5.New(p), &rivermigrate.Config{Schema: schema, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		t.Fatal(err)
	}
	return p, schema
}

// soon retries a failed job 10 ms later.
type soon struct{}

func (soon) NextRetry(*rivertype.JobRow) time.Time { return time.Now().Add(10 * time.Millisecond) }

func start(t *testing.T, p *pgxpool.Pool, schema string, workers *river.Workers) *river.Client[pgx.Tx] {
	t.Helper()
	c, err := river.NewClient(riverpgxv5.New(p), &river.Config{
		Schema:            schema,
		Logger:            quiet,
		Middleware:        []rivertype.Middleware{&riverjob.Middleware{}},
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: 4}},
		Workers:           workers,
		RetryPolicy:       soon{},
		FetchCooldown:     5 * time.Millisecond,
		FetchPollInterval: 20 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c.Stop(ctx)
	})
	return c
}

type ShipArgs struct {
	Order string `json:"order"`
}

func (ShipArgs) Kind() string { return "ship" }

// shipping is the provider a job calls: its first four requests fail
// with 503 before they reach its idempotency middleware; the rest run
// once per key.
type shipping struct {
	mu       sync.Mutex
	sends    int
	keys     map[string]int // sends per Idempotency-Key
	effects  int
	failures atomic.Int32
}

func (s *shipping) server(t *testing.T) *httptest.Server {
	mw, err := idempotency.New(idempotency.Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	inner := mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.effects++
		s.mu.Unlock()
		w.WriteHeader(http.StatusCreated)
	}))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.sends++
		s.keys[r.Header.Get("Idempotency-Key")]++
		s.mu.Unlock()
		if s.failures.Add(1) <= 4 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		inner.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// A job that calls a provider through a Transport, retried by River:
// every attempt sends the same derived key, so the provider's
// idempotency layer runs the shipment once although the job made its call
// four times, and after the first attempt each call is sent once, River's
// retry being the one that counts: 3 sends on the first attempt (the
// Transport's), then 1 per attempt (the second's 503 is not retried by
// the Transport: River retries the job).
func TestStableKeysAndOneRetryLayer(t *testing.T) {
	p, schema := riverSchema(t)
	prov := &shipping{keys: map[string]int{}}
	srv := prov.server(t)
	tr := &retryhttp.Transport{InjectIdempotencyKey: true, Logger: quiet,
		Policy: retryhttp.Policy{MaxAttempts: 3, BaseDelay: time.Millisecond, MaxDelay: time.Millisecond}}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	var attempts atomic.Int32
	done := make(chan struct{})
	workers := river.NewWorkers()
	river.AddWorker(workers, river.WorkFunc(func(ctx context.Context, job *river.Job[ShipArgs]) error {
		n := attempts.Add(1)
		req, _ := http.NewRequestWithContext(ctx, "POST", srv.URL+"/shipments", strings.NewReader(`{"order":"`+job.Args.Order+`"}`))
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		switch {
		case resp.StatusCode != http.StatusCreated:
			return fmt.Errorf("the provider answered %d", resp.StatusCode)
		case n == 3:
			return errors.New("the worker failed after its call") // the shipment happened; River runs the job again
		}
		close(done)
		return nil
	}))
	c := start(t, p, schema, workers)
	if _, err := c.Insert(context.Background(), ShipArgs{Order: "order-7"}, nil); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatalf("the job did not complete (%d attempts)", attempts.Load())
	}
	prov.mu.Lock()
	defer prov.mu.Unlock()
	if attempts.Load() != 4 || prov.effects != 1 || len(prov.keys) != 1 || prov.sends != 6 {
		t.Fatalf("%d job attempts, %d sends with %d keys (%v), %d shipments; want 4 attempts, 6 sends (3, then 1 each) of one key, 1 shipment",
			attempts.Load(), prov.sends, len(prov.keys), prov.keys, prov.effects)
	}
}

// A Key that gives no key cancels the job before it runs: no retry
// would give it one.
func TestNoKeyCancelsTheJob(t *testing.T) {
	m := &riverjob.Middleware{Key: func(*rivertype.JobRow) (string, error) { return "", nil }}
	ran := false
	err := m.Work(context.Background(), &rivertype.JobRow{ID: 1, Attempt: 1}, func(context.Context) error { ran = true; return nil })
	var cancel *river.JobCancelError
	if !errors.Is(err, riverjob.ErrNoKey) || !errors.As(err, &cancel) || ran {
		t.Fatalf("err %v, ran %v; want ErrNoKey, the job cancelled and not run", err, ran)
	}
}

// A worker's queue.Permanent error cancels the job; any other error is
// River's to retry, as it was returned.
func TestPermanentErrorCancelsTheJob(t *testing.T) {
	var m riverjob.Middleware
	var cancel *river.JobCancelError
	gone := errors.New("the order no longer exists")
	err := m.Work(context.Background(), &rivertype.JobRow{ID: 1, Attempt: 1}, func(context.Context) error { return queue.Permanent(gone) })
	if !errors.As(err, &cancel) || !errors.Is(err, gone) {
		t.Errorf("err %v; want the job cancelled with its error", err)
	}
	flicker := errors.New("the provider flickered")
	err = m.Work(context.Background(), &rivertype.JobRow{ID: 1, Attempt: 1}, func(context.Context) error { return flicker })
	if err != flicker {
		t.Errorf("err %v; want the worker's own", err)
	}
}

// The transactional insert: behind the middleware in transactional mode,
// a request sent three times with one key enqueues one job; a handler
// that fails after its insert enqueues none.
func TestTransactionalInsert(t *testing.T) {
	p, schema := riverSchema(t)
	ctx := context.Background()
	jobs, err := river.NewClient[pgx.Tx](riverpgxv5.New(p), &river.Config{Schema: schema, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	table := "idem_" + strings.ReplaceAll(uuid.NewString(), "-", "")
	store, err := pgstore.New(p, table)
	if err == nil {
		err = store.Migrate(ctx)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.Exec(context.Background(), "DROP TABLE IF EXISTS "+table)
		p.Exec(context.Background(), "DELETE FROM retryhttp_schema_versions WHERE name = $1", table)
	})
	mw, err := idempotency.New(idempotency.Options{Store: store, Transactional: true, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	h := mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tx, err := pgstore.Tx(r.Context())
		if err != nil {
			t.Error(err)
			return
		}
		order := r.URL.Query().Get("order")
		if _, err := jobs.InsertTx(r.Context(), tx, ShipArgs{Order: order}, nil); err != nil {
			t.Error(err)
			return
		}
		if order == "fails" {
			w.WriteHeader(http.StatusInternalServerError) // not stored: rolled back with the job
			return
		}
		w.WriteHeader(http.StatusCreated)
	}))
	send := func(order, key string) int {
		req := httptest.NewRequest("POST", "/orders?order="+order, nil)
		req.Header.Set("Idempotency-Key", key)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code
	}
	for range 3 {
		if code := send("order-7", "key-7"); code != http.StatusCreated {
			t.Fatalf("status %d", code)
		}
	}
	if code := send("fails", "key-8"); code != http.StatusInternalServerError {
		t.Fatalf("status %d", code)
	}
	count := func(order string) int {
		var n int
		if err := p.QueryRow(ctx, "SELECT count(*) FROM "+schema+".river_job WHERE args->>'order' = $1", order).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n, failed := count("order-7"), count("fails"); n != 1 || failed != 0 {
		t.Fatalf("%d jobs for the order sent three times, %d for the failed one; want 1 and 0", n, failed)
	}
}

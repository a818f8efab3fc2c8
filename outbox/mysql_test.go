package outbox_test

// The outbox on MySQL and MariaDB (NewMySQL): the same delivery semantics
// as on PostgreSQL, against the tests' MariaDB.

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/retryhttp/retryhttp"
	"github.com/retryhttp/retryhttp/idempotency"
	"github.com/retryhttp/retryhttp/outbox"
	"github.com/retryhttp/retryhttp/outbox/internal/outboxtest"
	"github.com/retryhttp/retryhttp/queue"
	"github.com/retryhttp/retryhttp/shared/faultproxy"
	"github.com/retryhttp/retryhttp/shared/mysqltest"
	"github.com/retryhttp/retryhttp/shared/testenv"
)

// mysqlOutbox is a migrated outbox on a table of the test's own in db,
// dropped when the test ends.
func mysqlOutbox(t *testing.T, db *sql.DB) *outbox.Outbox {
	t.Helper()
	table := "outbox_" + strings.ReplaceAll(uuid.NewString(), "-", "")
	o, err := outbox.NewMySQL(db, table)
	if err != nil {
		t.Fatal(err)
	}
	if err := o.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		db.Exec("DROP TABLE IF EXISTS " + table)
		db.Exec("DELETE FROM retryhttp_schema_versions WHERE name = ?", table)
	})
	return o
}

func mysqlNotDelivered(t *testing.T, db *sql.DB, o *outbox.Outbox) int {
	t.Helper()
	var n int
	if err := db.QueryRow("SELECT COUNT(*) FROM " + o.Table() + " WHERE status <> 'delivered'").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// A message exists if and only if its transaction commits, and is
// delivered with its ID as Idempotency-Key, method, header and body kept.
func TestMySQLCommittedMessagesAreDelivered(t *testing.T) {
	db := mysqltest.DB(t)
	o := mysqlOutbox(t, db)
	rc := &receiver{}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	ctx := context.Background()

	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	id, err := o.Enqueue(ctx, tx, outbox.Message{Method: "PUT", URL: srv.URL + "/mail", Header: http.Header{"X-Kind": {"receipt"}}, Body: []byte(`{"order":1}`)})
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	tx, _ = db.BeginTx(ctx, nil)
	if _, err := o.Enqueue(ctx, tx, outbox.Message{URL: srv.URL + "/rolled-back"}); err != nil {
		t.Fatal(err)
	}
	tx.Rollback()

	events := &eventLog{}
	outboxtest.Run(t, outbox.RelayOptions{Outbox: o, PollInterval: 10 * time.Millisecond, Hooks: []outbox.Hook{events.hook()}})
	outboxtest.Eventually(t, "delivery", func() bool { return state(t, o, id).Status == outbox.Delivered })
	time.Sleep(100 * time.Millisecond)
	if got := events.list(); !slices.Equal(got, []string{"delivered " + id + " 200 0"}) {
		t.Errorf("hook events %q, want the one delivery", got)
	}
	if rc.count() != 1 {
		t.Fatalf("%d deliveries, want 1 (the rolled-back message does not exist)", rc.count())
	}
	r := rc.reqs[0]
	if r.Method != "PUT" || r.URL.Path != "/mail" || r.Header.Get("X-Kind") != "receipt" || rc.bodies[0] != `{"order":1}` {
		t.Fatalf("delivered %s %s %v %q", r.Method, r.URL.Path, r.Header, rc.bodies[0])
	}
	if got := r.Header.Get("Idempotency-Key"); got != id {
		t.Fatalf("Idempotency-Key %q, want the message ID %q", got, id)
	}
	if s := state(t, o, id); s.Deliveries != 1 || s.LastStatus != 200 || s.LastError != "" {
		t.Fatalf("state %+v, want delivered once with 200", s)
	}
	// Written through something that is not database/sql's: a clear error.
	if _, err := o.Enqueue(ctx, struct{}{}, outbox.Message{URL: srv.URL}); err == nil || !strings.Contains(err.Error(), "*sql.Tx") {
		t.Fatalf("Enqueue through a struct{}: %v, want an error naming what it takes", err)
	}
	if _, err := o.State(ctx, "no-such-id"); !errors.Is(err, outbox.ErrNotFound) {
		t.Fatalf("State of an unknown ID: %v, want ErrNotFound", err)
	}
}

// Failures are retried with the relay's Backoff, then the message is
// dead; a refusal for good is dead at once. The metrics and the hooks
// count each.
func TestMySQLBackoffAndDeadLetter(t *testing.T) {
	db := mysqltest.DB(t)
	o := mysqlOutbox(t, db)
	reg := prometheus.NewRegistry()
	m, err := outbox.NewMetrics(reg, o)
	if err != nil {
		t.Fatal(err)
	}
	down := &receiver{status: func(int) int { return 503 }}
	bad := &receiver{status: func(int) int { return 422 }}
	srvDown, srvBad := httptest.NewServer(down), httptest.NewServer(bad)
	defer srvDown.Close()
	defer srvBad.Close()
	ctx := context.Background()
	idDown, _ := o.Enqueue(ctx, db, outbox.Message{URL: srvDown.URL})
	idBad, _ := o.Enqueue(ctx, db, outbox.Message{URL: srvBad.URL})
	if got := gauge(t, reg, "outbox_pending"); got != 2 {
		t.Fatalf("outbox_pending %v, want 2", got)
	}
	events := &eventLog{}
	outboxtest.Run(t, outbox.RelayOptions{Outbox: o, Hooks: []outbox.Hook{m, events.hook()}, PollInterval: 5 * time.Millisecond,
		MaxDeliveries: 3, Backoff: queue.Backoff{Base: 30 * time.Millisecond, Max: 30 * time.Millisecond, Jitter: retryhttp.JitterNone}})
	outboxtest.Eventually(t, "both dead", func() bool {
		return state(t, o, idDown).Status == outbox.Dead && state(t, o, idBad).Status == outbox.Dead
	})
	if s := state(t, o, idDown); s.Deliveries != 3 || s.LastStatus != 503 || down.count() != 3 {
		t.Fatalf("the 503 message: %+v after %d requests; want dead after 3", s, down.count())
	}
	if s := state(t, o, idBad); s.Deliveries != 1 || s.LastStatus != 422 {
		t.Fatalf("the 422 message: %+v; want dead after 1", s)
	}
	for i := 1; i < len(down.at); i++ {
		if gap := down.at[i].Sub(down.at[i-1]); gap < 30*time.Millisecond {
			t.Errorf("delivery %d came %v after the one before, want the 30 ms backoff", i+1, gap)
		}
	}
	if got := counter(t, reg, "retried"); got != 2 {
		t.Errorf("retried %v, want 2", got)
	}
	if got := counter(t, reg, "dead"); got != 2 {
		t.Errorf("dead %v, want 2", got)
	}
	if got := gauge(t, reg, "outbox_pending"); got != 0 {
		t.Errorf("pending %v, want 0", got)
	}
	got := events.list()
	want := []string{"retried " + idDown + " 503 1", "retried " + idDown + " 503 2", "dead " + idDown + " 503 3", "dead " + idBad + " 422 1"}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("hook events %q, want %q", got, want)
	}
}

// The backlog gauges read the table.
func TestMySQLBacklogMetrics(t *testing.T) {
	db := mysqltest.DB(t)
	o := mysqlOutbox(t, db)
	reg := prometheus.NewRegistry()
	if _, err := outbox.NewMetrics(reg, o); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := o.Enqueue(context.Background(), db, outbox.Message{URL: "http://127.0.0.1:1/"}); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(50 * time.Millisecond)
	if got := gauge(t, reg, "outbox_pending"); got != 3 {
		t.Fatalf("pending %v, want 3", got)
	}
	if got := gauge(t, reg, "outbox_oldest_pending_seconds"); got < 0.04 || got > 5 {
		t.Fatalf("oldest %v s, want about 0.05", got)
	}
}

// Four relays on one outbox: every message delivered exactly once (leases
// with FOR UPDATE SKIP LOCKED: no two relays hold one message).
func TestMySQLConcurrentRelays(t *testing.T) {
	db := mysqltest.DB(t)
	o := mysqlOutbox(t, db)
	var mu sync.Mutex
	perKey := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		perKey[r.Header.Get("Idempotency-Key")]++
		mu.Unlock()
	}))
	defer srv.Close()
	const n = 400
	for range n {
		if _, err := o.Enqueue(context.Background(), db, outbox.Message{URL: srv.URL}); err != nil {
			t.Fatal(err)
		}
	}
	for range 4 {
		outboxtest.Run(t, outbox.RelayOptions{Outbox: o, Batch: 16, PollInterval: 5 * time.Millisecond})
	}
	outboxtest.Eventually(t, "all delivered", func() bool { return mysqlNotDelivered(t, db, o) == 0 })
	mu.Lock()
	defer mu.Unlock()
	onceEach(t, perKey, n)
}

// The relay's database refuses connections just as the receiver accepts a
// delivery: the outcome is written once the database is back, before the
// lease ends, so the message is not delivered again.
func TestMySQLLostOutcomeIsRecordedBeforeTheLease(t *testing.T) {
	direct := mysqltest.DB(t)
	mine := mysqlOutbox(t, direct)
	host := "127.0.0.1:3306"
	if i := strings.Index(testenv.MySQLDSN(), "tcp("); i >= 0 {
		host = strings.SplitN(testenv.MySQLDSN()[i+4:], ")", 2)[0]
	}
	proxy := faultproxy.Start(t, host)
	viaProxy := mysqltest.Open(t, strings.Replace(testenv.MySQLDSN(), host, proxy.Addr(), 1))
	o, err := outbox.NewMySQL(viaProxy, mine.Table())
	if err != nil {
		t.Fatal(err)
	}
	var got atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if got.Add(1) == 1 {
			proxy.Refuse() // the relay's database is down with the answer on its way
			proxy.CutAll()
			time.AfterFunc(300*time.Millisecond, proxy.Heal)
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	id, err := o.Enqueue(context.Background(), direct, outbox.Message{URL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	outboxtest.Run(t, outbox.RelayOptions{Outbox: o, Lease: 3 * time.Second, PollInterval: 10 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
	outboxtest.Eventually(t, "delivered", func() bool { return state(t, mine, id).Status == outbox.Delivered })
	if s := state(t, mine, id); s.Deliveries != 1 || got.Load() != 1 {
		t.Fatalf("recorded after %d deliveries, the receiver got it %d times: want once, the lost outcome written before the lease ran out", s.Deliveries, got.Load())
	}
}

// The embedded migrations build the table, safely from many replicas at
// once; down to 0 drops it.
func TestMySQLMigrations(t *testing.T) {
	db := mysqltest.DB(t)
	ctx := context.Background()
	table := "outbox_" + strings.ReplaceAll(uuid.NewString(), "-", "")
	t.Cleanup(func() {
		db.Exec("DROP TABLE IF EXISTS " + table)
		db.Exec("DELETE FROM retryhttp_schema_versions WHERE name = ?", table)
	})
	o, err := outbox.NewMySQL(db, table)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Go(func() { errs <- o.Migrate(ctx) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if !strings.Contains(outbox.MySQLSchemaFor(table), "CREATE TABLE IF NOT EXISTS `"+table+"`") {
		t.Fatalf("MySQLSchemaFor: %s", outbox.MySQLSchemaFor(table))
	}
	if err := o.MigrateDown(ctx, 0); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := db.QueryRow("SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name = ?", table).Scan(&n); err != nil || n != 0 {
		t.Fatalf("MigrateDown(0) left the table (%d, %v)", n, err)
	}
	for _, bad := range []string{"a b", "x`y", "a.b.c"} {
		if _, err := outbox.NewMySQL(db, bad); err == nil {
			t.Errorf("table name %q accepted", bad)
		}
	}
	if _, err := outbox.NewMySQL(nil, ""); err == nil {
		t.Error("nil db accepted")
	}
}

// A MariaDB of the test's own is killed with SIGKILL and started again,
// twice, while four relays drain 300 messages to a receiver behind the
// idempotency middleware: every message's effect happens once, none is
// lost (the relays retry their leases and records; a delivery whose
// record died with the server is delivered again after its lease, with
// the same key, and the receiver replays it).
func TestMySQLServerKilledWhileRelaying(t *testing.T) {
	own := mysqltest.StartServer(t)
	db := mysqltest.Open(t, own.DSN())
	o := mysqlOutbox(t, db)
	mw, err := idempotency.New(idempotency.Options{Logger: outboxtest.Quiet})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	effects := map[string]int{}
	var requests atomic.Int64
	handler := mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		effects[r.Header.Get("X-Order")]++
		mu.Unlock()
		w.WriteHeader(http.StatusCreated)
	}))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		handler.ServeHTTP(w, r)
	}))
	defer srv.Close()
	const n = 300
	for i := range n {
		if _, err := o.Enqueue(context.Background(), db, outbox.Message{URL: srv.URL, Header: http.Header{"X-Order": {fmt.Sprint(i)}}}); err != nil {
			t.Fatal(err)
		}
	}
	for range 4 {
		outboxtest.Run(t, outbox.RelayOptions{Outbox: o, Batch: 8, Lease: time.Second, PollInterval: 10 * time.Millisecond,
			Backoff: queue.Backoff{Base: 10 * time.Millisecond, Max: 50 * time.Millisecond}})
	}
	for k := range 2 {
		outboxtest.Eventually(t, "some deliveries", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(effects) >= (k+1)*n/4
		})
		own.Kill()
		own.Start()
	}
	outboxtest.Eventually(t, "all delivered", func() bool {
		var pending int
		err := db.QueryRow("SELECT COUNT(*) FROM " + o.Table() + " WHERE status <> 'delivered'").Scan(&pending)
		return err == nil && pending == 0
	})
	mu.Lock()
	defer mu.Unlock()
	t.Logf("server killed twice while relaying: %d messages, %d requests at the receiver, %d effects", n, requests.Load(), len(effects))
	onceEach(t, effects, n)
}

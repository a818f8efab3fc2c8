package outbox_test

// The outbox on MySQL and MariaDB (NewMySQL): the same delivery semantics
// as on PostgreSQL, against the tests' MariaDB.

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

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

// The outbox's semantics on MySQL, as on PostgreSQL: a message exists if
// and only if its transaction commits and is delivered with its ID as
// key; failures back off, then die; the backlog gauges read the table;
// concurrent relays deliver each message once (FOR UPDATE SKIP LOCKED).
func TestMySQL(t *testing.T) {
	ctx := context.Background()
	t.Run("committed messages are delivered", func(t *testing.T) {
		db := mysqltest.DB(t)
		testCommittedMessagesAreDelivered(t, mysqlOutbox(t, db), db, func() (outbox.Querier, func() error, func()) {
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			return tx, tx.Commit, func() { tx.Rollback() }
		})
	})
	t.Run("backoff and dead letter", func(t *testing.T) {
		db := mysqltest.DB(t)
		testBackoffAndDeadLetter(t, mysqlOutbox(t, db), db)
	})
	t.Run("backlog metrics", func(t *testing.T) {
		db := mysqltest.DB(t)
		testBacklogMetrics(t, mysqlOutbox(t, db), db)
	})
	t.Run("concurrent relays", func(t *testing.T) {
		db := mysqltest.DB(t)
		o := mysqlOutbox(t, db)
		testConcurrentRelays(t, o, db, func() int { return mysqlNotDelivered(t, db, o) })
	})
	t.Run("state of an unknown ID", func(t *testing.T) {
		if _, err := mysqlOutbox(t, mysqltest.DB(t)).State(ctx, "no-such-id"); !errors.Is(err, outbox.ErrNotFound) {
			t.Fatalf("State of an unknown ID: %v, want ErrNotFound", err)
		}
	})
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
	testLostOutcome(t, mine, o, direct, proxy)
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

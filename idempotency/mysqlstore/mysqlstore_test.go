package mysqlstore_test

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"go.uber.org/goleak"

	"github.com/retryhttp/retryhttp/idempotency"
	"github.com/retryhttp/retryhttp/idempotency/mysqlstore"
	"github.com/retryhttp/retryhttp/idempotency/storetest"
	"github.com/retryhttp/retryhttp/shared/mysqltest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var quiet = slog.New(slog.DiscardHandler)

// tableName is a table of the test's own.
func tableName(prefix string) string {
	return prefix + "_" + strings.ReplaceAll(uuid.NewString(), "-", "")
}

// newStoreOn returns a migrated Store on a table of the test's own in db,
// dropped when the test ends.
func newStoreOn(t testing.TB, db *sql.DB) (*mysqlstore.Store, string) {
	t.Helper()
	table := tableName("idem")
	s, err := mysqlstore.New(db, table)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		db.Exec("DROP TABLE IF EXISTS " + table)
		db.Exec("DELETE FROM retryhttp_schema_versions WHERE name = ?", table)
	})
	return s, table
}

func newStore(t testing.TB) *mysqlstore.Store {
	s, _ := newStoreOn(t, mysqltest.DB(t))
	return s
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) idempotency.Store { return newStore(t) })
}

// With the replay cache on, the same answers.
func TestConformanceCached(t *testing.T) {
	storetest.RunCached(t, func(t *testing.T) idempotency.Store { return newStore(t) })
}

func TestNewValidates(t *testing.T) {
	if _, err := mysqlstore.New(nil, ""); err == nil {
		t.Error("nil db accepted")
	}
	db := mysqltest.DB(t)
	for _, bad := range []string{"drop table x;", "a b", "1abc", "x`y", "a.b.c", strings.Repeat("x", 65)} {
		if _, err := mysqlstore.New(db, bad); err == nil {
			t.Errorf("table name %q accepted", bad)
		}
	}
	if _, err := mysqlstore.New(db, "test.idem"); err != nil {
		t.Errorf("database-qualified name rejected: %v", err)
	}
}

// Claims of one free key from many goroutines at once: exactly one takes
// it, and every other sees its in-flight record.
func TestConcurrentClaims(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	for round := range 20 {
		key := fmt.Sprintf("race-%d", round)
		var wg sync.WaitGroup
		var mu sync.Mutex
		won, saw := 0, 0
		for i := range 16 {
			wg.Go(func() {
				rec, err := s.Claim(ctx, idempotency.ClaimParams{Key: key, Fingerprint: "fp", Owner: fmt.Sprintf("o%d", i), Lock: time.Minute})
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err != nil:
					t.Error(err)
				case rec == nil:
					won++
				case rec.Fingerprint == "fp" && rec.Response == nil:
					saw++
				}
			})
		}
		wg.Wait()
		if won != 1 || saw != 15 {
			t.Fatalf("round %d: %d claimers took the key and %d saw it in flight, want 1 and 15", round, won, saw)
		}
	}
}

// Sweep deletes expired records in batches and leaves the live ones.
func TestSweep(t *testing.T) {
	db := mysqltest.DB(t)
	s, table := newStoreOn(t, db)
	ctx := context.Background()
	const old, live = mysqlstore.SweepBatch + 500, 50
	insert := func(prefix string, n int, expires string) {
		var b strings.Builder
		b.WriteString("INSERT INTO " + table + " (idem_key, fingerprint, owner, done, status, expires_at, created_at) VALUES ")
		for i := range n {
			if i > 0 {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, "('%s-%d', 'fp', 'o', TRUE, 201, %s, UTC_TIMESTAMP(6))", prefix, i, expires)
		}
		if _, err := db.ExecContext(ctx, b.String()); err != nil {
			t.Fatal(err)
		}
	}
	insert("old", old, "UTC_TIMESTAMP(6) - INTERVAL 1 HOUR")
	insert("live", live, "UTC_TIMESTAMP(6) + INTERVAL 1 HOUR")
	n, err := s.Sweep(ctx)
	if err != nil || n != old {
		t.Fatalf("Sweep: %d, %v; want %d", n, err, old)
	}
	var left int
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+table).Scan(&left); err != nil || left != live {
		t.Fatalf("%d rows left, %v; want the %d live ones", left, err, live)
	}
	if n, err := s.Sweep(ctx); err != nil || n != 0 {
		t.Fatalf("a second Sweep: %d, %v; want 0", n, err)
	}
}

// Migrate is safe to run twice and from many replicas at once; MigrateDown
// drops the table.
func TestMigrations(t *testing.T) {
	db := mysqltest.DB(t)
	ctx := context.Background()
	table := tableName("legacy")
	t.Cleanup(func() {
		db.Exec("DROP TABLE IF EXISTS " + table)
		db.Exec("DELETE FROM retryhttp_schema_versions WHERE name = ?", table)
	})
	if _, err := db.ExecContext(ctx, strings.TrimSuffix(strings.TrimSpace(mysqlstore.SchemaFor(table)), ";")); err != nil { // as applied by a tool of one's own
		t.Fatal(err)
	}
	s, err := mysqlstore.New(db, table)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Go(func() { errs <- s.Migrate(ctx) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	var v int
	if err := db.QueryRowContext(ctx, "SELECT version FROM retryhttp_schema_versions WHERE name = ?", table).Scan(&v); err != nil || v != 1 {
		t.Fatalf("version %d, %v; want 1", v, err)
	}
	if _, err := s.Claim(ctx, idempotency.ClaimParams{Key: "k", Fingerprint: "fp", Owner: "o", Lock: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if err := s.MigrateDown(ctx, 0); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name = ?", table).Scan(&n); err != nil || n != 0 {
		t.Fatalf("MigrateDown(0) left the table (%d, %v)", n, err)
	}
	if err := s.Migrate(ctx); err != nil { // and back up, from the record of version 0
		t.Fatal(err)
	}
}

func chargesTable(t *testing.T, db *sql.DB) string {
	t.Helper()
	table := tableName("charges")
	if _, err := db.Exec("CREATE TABLE " + table + " (id BIGINT AUTO_INCREMENT PRIMARY KEY, amount INT NOT NULL) ENGINE=InnoDB"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Exec("DROP TABLE IF EXISTS " + table) })
	return table
}

func countRows(t *testing.T, db *sql.DB, table string) (n int) {
	t.Helper()
	if err := db.QueryRow("SELECT COUNT(*) FROM " + table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestTransactional(t *testing.T) {
	storetest.RunTransactional(t, func(t *testing.T) storetest.TxEnv {
		db := mysqltest.DB(t)
		charges := chargesTable(t, db)
		s, _ := newStoreOn(t, db)
		return storetest.TxEnv{
			Store: s,
			Charge: func(r *http.Request) (int64, error) {
				tx, err := mysqlstore.Tx(r.Context())
				if err != nil {
					return 0, err
				}
				res, err := tx.ExecContext(r.Context(), "INSERT INTO "+charges+" (amount) VALUES (100)")
				if err != nil {
					return 0, err
				}
				return res.LastInsertId()
			},
			Charges: func() int { return countRows(t, db, charges) },
		}
	})
	if _, err := mysqlstore.Tx(context.Background()); err != mysqlstore.ErrNoTx {
		t.Fatalf("Tx outside transactional mode: %v, want ErrNoTx", err)
	}
}

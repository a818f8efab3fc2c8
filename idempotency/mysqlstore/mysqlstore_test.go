package mysqlstore_test

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
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

// chargeHandler writes one charge row through the request's transaction
// and answers by the script: "ok" (201), "503", "panic", "slow" (then
// 201), one step per run.
type chargeHandler struct {
	table  string
	mu     sync.Mutex
	script []string
	n      int
}

func (h *chargeHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	step := h.script[min(h.n, len(h.script)-1)]
	h.n++
	h.mu.Unlock()
	tx, err := mysqlstore.Tx(r.Context())
	if err != nil {
		http.Error(w, err.Error(), 500)
		return
	}
	res, err := tx.ExecContext(r.Context(), "INSERT INTO "+h.table+" (amount) VALUES (100)")
	if err != nil {
		http.Error(w, err.Error(), 500)
		return
	}
	id, _ := res.LastInsertId()
	switch step {
	case "503":
		http.Error(w, "downstream unavailable", http.StatusServiceUnavailable)
		return
	case "panic":
		panic("handler bug")
	case "slow":
		time.Sleep(400 * time.Millisecond)
	}
	w.WriteHeader(http.StatusCreated)
	fmt.Fprintf(w, `{"id":%d}`, id)
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

// stalled is a store whose claims are never extended, as when the process
// holding them is cut off from the database: they expire under a running
// handler.
type stalled struct{ *mysqlstore.Store }

func (stalled) Extend(context.Context, idempotency.ExtendParams) error { return nil }

func txServer(t *testing.T, s idempotency.TxStore, h http.Handler, lock time.Duration) string {
	m, err := idempotency.New(idempotency.Options{Store: s, Transactional: true, LockTimeout: lock, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				http.Error(w, fmt.Sprint(v), 500)
			}
		}()
		m.Handler(h).ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func postKey(t *testing.T, url, key string) (int, string) {
	req, _ := http.NewRequest("POST", url, strings.NewReader(`{"amount":100}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Error(err)
		return 0, ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestTransactional(t *testing.T) {
	for _, tc := range []struct {
		name    string
		script  []string
		codes   []int
		charges int
	}{
		{"effect and response commit together", []string{"ok"}, []int{201, 201, 201, 201, 201}, 1},
		{"a 503 rolls the effect back and frees the key", []string{"503", "ok"}, []int{503, 201, 201}, 1},
		{"a panic rolls back and frees the key", []string{"panic", "ok"}, []int{500, 201}, 1},
		{"only the 503 runs: nothing committed", []string{"503"}, []int{503, 503}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := mysqltest.DB(t)
			charges := chargesTable(t, db)
			s, _ := newStoreOn(t, db)
			url := txServer(t, s, &chargeHandler{table: charges, script: tc.script}, 0)
			var first string
			for i, want := range tc.codes {
				code, body := postKey(t, url, "tx-key")
				if code != want {
					t.Fatalf("request %d: %d %s, want %d", i+1, code, body, want)
				}
				if code == 201 && first == "" {
					first = body
				} else if code == 201 && body != first {
					t.Fatalf("request %d: %s, want the replay of %s", i+1, body, first)
				}
			}
			if n := countRows(t, db, charges); n != tc.charges {
				t.Fatalf("%d charges, want %d", n, tc.charges)
			}
		})
	}
	t.Run("a request whose claim expired cannot commit", func(t *testing.T) {
		db := mysqltest.DB(t)
		charges := chargesTable(t, db)
		s, _ := newStoreOn(t, db)
		h := &chargeHandler{table: charges, script: []string{"slow", "ok"}}
		url := txServer(t, stalled{s}, h, 150*time.Millisecond)
		slow := make(chan int)
		go func() { code, _ := postKey(t, url, "tx-4"); slow <- code }()
		time.Sleep(250 * time.Millisecond) // past the lock timeout, while the first still runs
		if code, _ := postKey(t, url, "tx-4"); code != 201 {
			t.Fatalf("second: %d, want 201 after the lock timeout", code)
		}
		if code := <-slow; code != 503 {
			t.Errorf("the slow first request answered %d, want 503 (its commit must fail)", code)
		}
		if n := countRows(t, db, charges); n != 1 {
			t.Fatalf("%d charges, want 1: the slow request's effect must roll back", n)
		}
	})
	t.Run("Tx outside transactional mode", func(t *testing.T) {
		if _, err := mysqlstore.Tx(context.Background()); err != mysqlstore.ErrNoTx {
			t.Fatalf("Tx: %v, want ErrNoTx", err)
		}
	})
}

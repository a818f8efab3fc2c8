package pgstore_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/retryhttp/retryhttp"
	"github.com/retryhttp/retryhttp/idempotency"
	"github.com/retryhttp/retryhttp/idempotency/pgstore"
	"github.com/retryhttp/retryhttp/idempotency/storetest"
	"github.com/retryhttp/retryhttp/retryhttptest"
	"github.com/retryhttp/retryhttp/shared/pgtest"
)

// pool connects to the tests' PostgreSQL (pgtest.Pool).
func pool(t testing.TB) *pgxpool.Pool { return pgtest.Pool(t) }

// newStore gives each test its own table, dropped after.
func newStore(t *testing.T) *pgstore.Store {
	p := pool(t)
	table := "idem_" + strings.ReplaceAll(uuid.NewString(), "-", "")
	s, err := pgstore.New(p, table)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	tables.Store(s, table)
	t.Cleanup(func() {
		p.Exec(context.Background(), "DROP TABLE IF EXISTS "+table)
		p.Exec(context.Background(), "DELETE FROM retryhttp_schema_versions WHERE name = $1", table)
	})
	return s
}

var quiet = slog.New(slog.DiscardHandler)

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) idempotency.Store { return newStore(t) })
}

// With the replay cache on, the same answers.
func TestConformanceCached(t *testing.T) {
	storetest.RunCached(t, func(t *testing.T) idempotency.Store { return newStore(t) })
}

func TestNewValidates(t *testing.T) {
	if _, err := pgstore.New(nil, ""); err == nil {
		t.Error("nil pool accepted")
	}
	p := pool(t)
	for _, bad := range []string{"drop table x;", "a b", "1abc", `x"y`, "a.b.c"} {
		if _, err := pgstore.New(p, bad); err == nil {
			t.Errorf("table name %q accepted", bad)
		}
	}
	if _, err := pgstore.New(p, "public.idem"); err != nil {
		t.Errorf("schema-qualified name rejected: %v", err)
	}
}

func TestSweep(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	for i := range 3 {
		if _, err := s.Claim(ctx, idempotency.ClaimParams{Key: fmt.Sprint("k", i), Fingerprint: "fp", Owner: "o", Lock: 10 * time.Millisecond}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Claim(ctx, idempotency.ClaimParams{Key: "live", Fingerprint: "fp", Owner: "o", Lock: time.Minute}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	n, err := s.Sweep(ctx)
	if err != nil || n != 3 {
		t.Fatalf("Sweep = %d, %v; want 3 expired rows", n, err)
	}
}

// chargesTable makes a table for the side effect, one row per charge.
func chargesTable(t *testing.T, p *pgxpool.Pool) string {
	name := "charges_" + strings.ReplaceAll(uuid.NewString(), "-", "")
	if _, err := p.Exec(context.Background(), "CREATE TABLE "+name+" (id bigserial PRIMARY KEY, amount int NOT NULL, idem_key text)"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.Exec(context.Background(), "DROP TABLE IF EXISTS "+name)
		p.Exec(context.Background(), "DELETE FROM retryhttp_schema_versions WHERE name = $1", name)
	})
	return name
}

func countRows(t *testing.T, p *pgxpool.Pool, table string) int {
	var n int
	if err := p.QueryRow(context.Background(), "SELECT count(*) FROM "+table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// charge inserts a charge, keyed by the request's Idempotency-Key,
// through the request's transaction, and answers 201 with its ID.
func charge(table string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tx, err := pgstore.Tx(r.Context())
		if err != nil {
			http.Error(w, err.Error(), 500)
			return
		}
		var id int64
		if err := tx.QueryRow(r.Context(), "INSERT INTO "+table+" (amount, idem_key) VALUES (100, $1) RETURNING id",
			r.Header.Get("Idempotency-Key")).Scan(&id); err != nil {
			http.Error(w, err.Error(), 500)
			return
		}
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"id":%d}`, id)
	})
}

func postKey(t *testing.T, url, key string) (int, string) {
	req, _ := http.NewRequest("POST", url, strings.NewReader(`{"amount":100}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestTransactional(t *testing.T) {
	storetest.RunTransactional(t, func(t *testing.T) storetest.TxEnv {
		p := pool(t)
		charges := chargesTable(t, p)
		return storetest.TxEnv{
			Store: newStore(t),
			Charge: func(r *http.Request) (int64, error) {
				tx, err := pgstore.Tx(r.Context())
				if err != nil {
					return 0, err
				}
				var id int64
				err = tx.QueryRow(r.Context(), "INSERT INTO "+charges+" (amount) VALUES (100) RETURNING id").Scan(&id)
				return id, err
			},
			Charges: func() int { return countRows(t, p, charges) },
		}
	})
}

// TestEndToEnd: retryhttp with injected keys, through a proxy that drops
// every third response after the server processed the request, to the
// middleware on PostgreSQL in transactional mode. 1,000 logical POSTs must
// make exactly 1,000 charges.
func TestEndToEnd(t *testing.T) {
	s := newStore(t)
	p := pool(t)
	charges := chargesTable(t, p)
	m, err := idempotency.New(idempotency.Options{Store: s, Transactional: true})
	if err != nil {
		t.Fatal(err)
	}
	const logical = 1000
	steps := make([]retryhttptest.Step, 0, 2*logical)
	for i := range 2 * logical {
		if i%3 == 0 {
			steps = append(steps, retryhttptest.DropResponse())
		} else {
			steps = append(steps, retryhttptest.Forward())
		}
	}
	srv := retryhttptest.Start(t, retryhttptest.Script{"/charges": steps},
		retryhttptest.Options{Handler: m.Handler(charge(charges))})
	tr := &retryhttp.Transport{
		Base:                 srv.Transport(),
		InjectIdempotencyKey: true,
		Budget:               retryhttp.NoBudget,
		// A third of all responses are dropped, shared by 16 workers, and
		// net/http's own resends count as attempts: with 10 attempts, one of
		// 1,000 requests met ten drops in a row about once in 60 runs. At 25
		// that is (1/3)^25 per request.
		Policy: retryhttp.Policy{MaxAttempts: 25, BaseDelay: time.Millisecond, MaxDelay: 5 * time.Millisecond},
	}
	t.Cleanup(tr.CloseIdleConnections)
	client := &http.Client{Transport: tr}

	var wg sync.WaitGroup
	errs := make(chan error, logical)
	work := make(chan int)
	for range 16 {
		wg.Go(func() {
			for range work {
				resp, err := client.Post(srv.URL+"/charges", "application/json", strings.NewReader(`{"amount":100}`))
				if err != nil {
					errs <- err
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusCreated {
					errs <- fmt.Errorf("status %d", resp.StatusCode)
				}
			}
		})
	}
	for i := range logical {
		work <- i
	}
	close(work)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	attempts := len(srv.Requests())
	var rows, keys int
	if err := p.QueryRow(context.Background(), "SELECT count(*), count(DISTINCT idem_key) FROM "+charges).Scan(&rows, &keys); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d logical POSTs, %d attempts (%d responses dropped), %d charges under %d keys", logical, attempts, attempts-logical, rows, keys)
	if rows != logical || keys != logical {
		t.Fatalf("%d charges under %d keys, want exactly %d", rows, keys, logical)
	}
	if attempts <= logical {
		t.Fatalf("only %d attempts: the proxy dropped nothing", attempts)
	}
}

func BenchmarkMiddleware(b *testing.B) {
	p := pool(b)
	table := "idem_bench_" + strings.ReplaceAll(uuid.NewString(), "-", "")
	s, err := pgstore.New(p, table)
	if err != nil {
		b.Fatal(err)
	}
	if err := s.Migrate(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		p.Exec(context.Background(), "DROP TABLE IF EXISTS "+table)
		p.Exec(context.Background(), "DELETE FROM retryhttp_schema_versions WHERE name = $1", table)
	})
	storetest.Bench(b, s)
}

// A job's effect and its stored result commit together: a failed
// run leaves no row, the redelivery runs again, a duplicate gets the
// result without running.
func TestRunnerTransactional(t *testing.T) {
	s := newStore(t)
	p := pool(t)
	charges := chargesTable(t, p)
	r, err := idempotency.NewRunner(idempotency.RunnerOptions{Store: s, Kind: "payments", Transactional: true, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	runs := 0
	job := func(fail bool) func(ctx context.Context) ([]byte, error) {
		return func(ctx context.Context) ([]byte, error) {
			runs++
			tx, err := pgstore.Tx(ctx)
			if err != nil {
				return nil, err
			}
			var id int64
			if err := tx.QueryRow(ctx, "INSERT INTO "+charges+" (amount) VALUES (100) RETURNING id").Scan(&id); err != nil {
				return nil, err
			}
			if fail {
				return nil, fmt.Errorf("the mail server is down")
			}
			return []byte(fmt.Sprint(id)), nil
		}
	}
	ctx := context.Background()
	if _, _, err := r.Do(ctx, "order-1", job(true)); err == nil {
		t.Fatal("the failing run returned no error")
	}
	if n := countRows(t, p, charges); n != 0 {
		t.Fatalf("%d rows after a failed run, want 0: its writes roll back", n)
	}
	first, replayed, err := r.Do(ctx, "order-1", job(false))
	if err != nil || replayed {
		t.Fatalf("redelivery: %v replayed=%v", err, replayed)
	}
	again, replayed, err := r.Do(ctx, "order-1", job(false))
	if err != nil || !replayed || string(again) != string(first) {
		t.Fatalf("duplicate: %q replayed=%v %v, want %q replayed", again, replayed, err, first)
	}
	if n := countRows(t, p, charges); n != 1 || runs != 2 {
		t.Fatalf("%d rows and %d runs, want 1 and 2", n, runs)
	}
}

// The embedded migrations load, and the schema they build is the one the
// Store queries; a table made before versions were kept is brought up.
func TestMigrations(t *testing.T) {
	p := pool(t)
	ctx := context.Background()
	table := "legacy_" + strings.ReplaceAll(uuid.NewString(), "-", "")
	t.Cleanup(func() {
		p.Exec(ctx, "DROP TABLE IF EXISTS "+table)
		p.Exec(ctx, "DELETE FROM retryhttp_schema_versions WHERE name = $1", table)
	})
	if _, err := p.Exec(ctx, pgstore.SchemaFor(table)); err != nil { // as an earlier release's Migrate made it
		t.Fatal(err)
	}
	s, err := pgstore.New(p, table)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := s.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
	}
	var v int
	if err := p.QueryRow(ctx, "SELECT version FROM retryhttp_schema_versions WHERE name = $1", table).Scan(&v); err != nil || v != 1 {
		t.Fatalf("version %d, %v; want 1", v, err)
	}
	if _, err := s.Claim(ctx, idempotency.ClaimParams{Key: "k", Fingerprint: "fp", Owner: "o", Lock: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if err := s.MigrateDown(ctx, 0); err != nil {
		t.Fatal(err)
	}
	var exists bool
	p.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", table).Scan(&exists)
	if exists {
		t.Fatal("MigrateDown(0) left the table")
	}
}

// expired inserts n rows that expired an hour ago and live rows that
// expire in an hour, straight into the table.
func expired(t *testing.T, p *pgxpool.Pool, table string, n, live int) {
	t.Helper()
	ctx := context.Background()
	if _, err := p.Exec(ctx, `INSERT INTO `+table+` (key, fingerprint, owner, done, status, expires_at)
SELECT 'old-' || g, 'fp', 'o', true, 201, now() - interval '1 hour' FROM generate_series(1, $1) g`, n); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Exec(ctx, `INSERT INTO `+table+` (key, fingerprint, owner, done, status, expires_at)
SELECT 'live-' || g, 'fp', 'o', true, 201, now() + interval '1 hour' FROM generate_series(1, $1) g`, live); err != nil {
		t.Fatal(err)
	}
}

func rows(t *testing.T, p *pgxpool.Pool, table string) (n int) {
	t.Helper()
	if err := p.QueryRow(context.Background(), "SELECT count(*) FROM "+table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// The Sweeper deletes in batches, leaves live rows, and skips a row a
// transaction holds instead of waiting for it.
func TestSweeperBatches(t *testing.T) {
	s := newStore(t)
	p := pool(t)
	v, _ := tables.Load(s)
	table := v.(string)
	expired(t, p, table, 2500, 10)
	ctx := context.Background()
	tx, err := p.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "SELECT 1 FROM "+table+" WHERE key = 'old-7' FOR UPDATE"); err != nil {
		t.Fatal(err)
	}
	sw, err := pgstore.NewSweeper(pgstore.SweeperOptions{Store: s, Batch: 1000, Pause: time.Millisecond, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	n, err := sw.Sweep(sctx)
	if err != nil || n != 2499 {
		t.Fatalf("Sweep = %d, %v; want the 2,499 expired rows no transaction holds", n, err)
	}
	tx.Rollback(ctx)
	if n, err := sw.Sweep(sctx); err != nil || n != 1 {
		t.Fatalf("second Sweep = %d, %v; want the row released", n, err)
	}
	if got := rows(t, p, table); got != 10 {
		t.Fatalf("%d rows left, want the 10 live ones", got)
	}
	for _, o := range []pgstore.SweeperOptions{{}, {Store: s, Batch: -1}, {Store: s, Pause: -1}, {Store: s, Interval: -1}} {
		if _, err := pgstore.NewSweeper(o); err == nil {
			t.Errorf("NewSweeper(%+v) accepted", o)
		}
	}
}

// Run sweeps every Interval until its context ends, and then returns nil.
func TestSweeperRun(t *testing.T) {
	s := newStore(t)
	p := pool(t)
	v, _ := tables.Load(s)
	table := v.(string)
	sw, err := pgstore.NewSweeper(pgstore.SweeperOptions{Store: s, Batch: 100, Pause: time.Millisecond, Interval: 10 * time.Millisecond, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- sw.Run(ctx) }()
	expired(t, p, table, 450, 3)
	deadline := time.Now().Add(10 * time.Second)
	for rows(t, p, table) != 3 {
		if time.Now().After(deadline) {
			t.Fatalf("%d rows left after 10 s of Run", rows(t, p, table))
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run returned %v after its context ended", err)
	}
}

package pgstore_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/retryhttp/retryhttp/idempotency"
	"github.com/retryhttp/retryhttp/idempotency/pgstore"
)

// Retention at size, a measurement run on demand
// (RETRYHTTP_SWEEP_ROWS=10000000): a table of that many records, half of
// them expired, each with a 1 KiB body and 6 header fields (the sweeper's
// Batch and Pause from RETRYHTTP_SWEEP_BATCH and RETRYHTTP_SWEEP_PAUSE); new keys
// claimed and completed through the middleware by 8 goroutines at rest,
// then while a Sweeper reclaims the expired half. It logs the time to
// reclaim and the requests' p50 and p99 in both phases.
func TestSweepAtSize(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("RETRYHTTP_SWEEP_ROWS"))
	if n == 0 {
		t.Skip("a measurement: set RETRYHTTP_SWEEP_ROWS=10000000 to run it")
	}
	p := pool(t)
	ctx := context.Background()
	table := "idem_size_" + strings.ReplaceAll(uuid.NewString(), "-", "")[:8]
	s, err := pgstore.New(p, table)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.Exec(context.Background(), "DROP TABLE IF EXISTS "+table)
		p.Exec(context.Background(), "DELETE FROM retryhttp_schema_versions WHERE name = $1", table)
	})
	began := time.Now()
	const chunk = 500_000
	for from := 0; from < n; from += chunk {
		if _, err := p.Exec(ctx, `INSERT INTO `+table+` (key, fingerprint, owner, done, status, header, body, expires_at)
SELECT 'k' || g, 'fp', 'o', true, 201,
  '{"Content-Type":["application/json"],"Date":["Tue, 01 Dec 2026 12:00:00 GMT"],"Request-Id":["req_123456"],"Cache-Control":["no-store"],"X-Ratelimit-Remaining":["99"],"Vary":["Origin"]}'::jsonb,
  decode(repeat('ab', 512), 'hex'),
  CASE WHEN g % 2 = 0 THEN now() - interval '1 hour' ELSE now() + interval '1 day' END
FROM generate_series($1::int, $2::int) g`, from+1, min(from+chunk, n)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := p.Exec(ctx, "VACUUM ANALYZE "+table); err != nil {
		t.Fatal(err)
	}
	var size string
	p.QueryRow(ctx, "SELECT pg_size_pretty(pg_total_relation_size($1))", table).Scan(&size)
	t.Logf("%d rows (%s with indexes) loaded in %v", n, size, time.Since(began).Round(time.Second))

	mw, err := idempotency.New(idempotency.Options{Store: s, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(201)
		w.Write(make([]byte, 1024))
	})))
	defer srv.Close()
	var seq atomic.Int64
	load := func(until func() bool) (p50, p99 time.Duration, count int) {
		var mu sync.Mutex
		var lat []time.Duration
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				for !until() {
					req, _ := http.NewRequest("POST", srv.URL, strings.NewReader(`{"amount":1}`))
					req.Header.Set("Idempotency-Key", fmt.Sprint("new-", seq.Add(1)))
					start := time.Now()
					resp, err := http.DefaultClient.Do(req)
					if err != nil {
						t.Error(err)
						return
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					mu.Lock()
					lat = append(lat, time.Since(start))
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		slices.Sort(lat)
		return lat[len(lat)/2], lat[len(lat)*99/100], len(lat)
	}
	restEnd := time.Now().Add(10 * time.Second)
	p50, p99, count := load(func() bool { return time.Now().After(restEnd) })
	t.Logf("at rest: %d requests in 10 s, p50 %v, p99 %v", count, p50.Round(10*time.Microsecond), p99.Round(10*time.Microsecond))

	batch, _ := strconv.Atoi(os.Getenv("RETRYHTTP_SWEEP_BATCH"))
	pause, _ := time.ParseDuration(os.Getenv("RETRYHTTP_SWEEP_PAUSE"))
	sw, err := pgstore.NewSweeper(pgstore.SweeperOptions{Store: s, Batch: batch, Pause: pause, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	var swept atomic.Bool
	var deleted int64
	var took time.Duration
	go func() {
		start := time.Now()
		deleted, err = sw.Sweep(ctx)
		took = time.Since(start)
		swept.Store(true)
	}()
	p50, p99, count = load(swept.Load)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("sweeping: %d expired rows deleted in %v (batches of %d, %v apart; 0 is the default); meanwhile %d requests, p50 %v, p99 %v",
		deleted, took.Round(time.Second), batch, pause, count, p50.Round(10*time.Microsecond), p99.Round(10*time.Microsecond))
}

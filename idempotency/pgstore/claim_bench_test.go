package pgstore

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/retryhttp/retryhttp/idempotency"
	"github.com/retryhttp/retryhttp/pgschema"
	"github.com/retryhttp/retryhttp/shared/testenv"
)

// insertFirst is the claim the Store used before it read first: insert
// with ON CONFLICT DO NOTHING, and read the existing record when the
// insert did nothing. Kept here, to be measured against the Store's.
func insertFirst(table string) string {
	t := pgschema.Quote(table)
	return `WITH ins AS (
	INSERT INTO ` + t + ` (key, fingerprint, owner, expires_at)
	VALUES ($1, $2, $3, now() + $4 * interval '1 microsecond')
	ON CONFLICT (key) DO NOTHING
	RETURNING 1
)
SELECT true, '', '', false, NULL::integer, NULL::jsonb, NULL::bytea, false, 0::float8 FROM ins
UNION ALL
SELECT false, fingerprint, owner, done, status, header, body, too_large,
	extract(epoch FROM expires_at - clock_timestamp())::float8 FROM ` + t + `
WHERE key = $1 AND NOT EXISTS (SELECT 1 FROM ins)`
}

// BenchmarkClaim: the Store's claim (read first) against insertFirst, on
// new keys and on completed ones (a replay's claim), and the plain SELECT
// a replay needs at the least (select/replay), from 1, 8 and 32
// goroutines; each sub-benchmark's ns/op is wall time per claim, so
// 1/ns/op is the throughput. Interleave runs with -count and compare with
// benchstat.
func BenchmarkClaim(b *testing.B) {
	ctx := context.Background()
	dsn := testenv.PostgresDSN()
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		b.Fatal(err)
	}
	cfg.MaxConns, cfg.MinConns = 40, 32
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err == nil {
		err = pool.Ping(ctx)
	}
	if err != nil {
		testenv.Unreachable(b, "PostgreSQL", dsn, err)
	}
	defer pool.Close()
	table := "bench_claim_" + strings.ReplaceAll(uuid.NewString(), "-", "")
	s, err := New(pool, table)
	if err == nil {
		err = s.Migrate(ctx)
	}
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		pool.Exec(ctx, "DROP TABLE IF EXISTS "+table)
		pool.Exec(ctx, "DELETE FROM retryhttp_schema_versions WHERE name = $1", table)
	}()
	const stored = 1000
	for i := range stored {
		k := fmt.Sprint("stored-", i)
		if _, err := s.Claim(ctx, idempotency.ClaimParams{Key: k, Fingerprint: "fp", Owner: "o", Lock: time.Minute}); err != nil {
			b.Fatal(err)
		}
		if err := s.Complete(ctx, idempotency.CompleteParams{Key: k, Owner: "o", Retention: time.Hour,
			Response: &idempotency.Response{Status: 201, Header: map[string][]string{"Content-Type": {"application/json"}}, Body: []byte(`{"id":"ch_1"}`)}}); err != nil {
			b.Fatal(err)
		}
	}
	variants := []struct{ name, claim string }{{"insert-first", insertFirst(table)}, {"read-first", s.claim}}
	var seq atomic.Int64
	// run measures op(i) from conc goroutines.
	run := func(b *testing.B, conc int, op func(i int64) error) {
		var next atomic.Int64
		var wg sync.WaitGroup
		for range conc {
			wg.Go(func() {
				for i := next.Add(1); i <= int64(b.N); i = next.Add(1) {
					if err := op(i); err != nil {
						b.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
	}
	read := `SELECT status, header, body FROM ` + pgschema.Quote(table) + ` WHERE key = $1`
	for _, conc := range []int{1, 8, 32} {
		for _, v := range variants {
			vs := *s
			vs.claim = v.claim
			for _, replay := range []bool{false, true} {
				kind := "new"
				if replay {
					kind = "replay"
				}
				b.Run(fmt.Sprintf("%s/%s/conc=%d", v.name, kind, conc), func(b *testing.B) {
					run(b, conc, func(i int64) error {
						k := fmt.Sprint("new-", seq.Add(1))
						if replay {
							k = fmt.Sprint("stored-", i%stored)
						}
						rec, err := vs.Claim(ctx, idempotency.ClaimParams{Key: k, Fingerprint: "fp", Owner: "o2", Lock: time.Minute})
						if err != nil || (rec != nil) != replay || (replay && rec.Response == nil) {
							return fmt.Errorf("%s: %+v, %v", k, rec, err)
						}
						return nil
					})
				})
			}
		}
		b.Run(fmt.Sprintf("select/replay/conc=%d", conc), func(b *testing.B) {
			run(b, conc, func(i int64) error {
				var status *int32
				var header, body []byte
				return pool.QueryRow(ctx, read, fmt.Sprint("stored-", i%stored)).Scan(&status, &header, &body)
			})
		})
	}
}

package pgstore_test

import (
	"context"
	"crypto/rand"
	"net/http"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/retryhttp/retryhttp/idempotency"
)

// Bytes per record on disk (table, TOAST and indexes, after VACUUM), for
// docs/server.md's capacity table: a measurement run on demand
// (RETRYHTTP_CAPACITY=1). The record is a 1 KiB body that does not
// compress, and 6 header fields.
func TestRecordSize(t *testing.T) {
	if os.Getenv("RETRYHTTP_CAPACITY") == "" {
		t.Skip("a measurement: set RETRYHTTP_CAPACITY=1 to run it")
	}
	s := newStore(t)
	p := pool(t)
	v, _ := tables.Load(s)
	table := v.(string)
	ctx := context.Background()
	const n = 20_000
	header := http.Header{"Content-Type": {"application/json"}, "Date": {"Tue, 01 Dec 2026 12:00:00 GMT"}, "Request-Id": {"req_8fJ2kLmN0pQ4rS6t"},
		"Cache-Control": {"no-store"}, "X-Ratelimit-Remaining": {"99"}, "Vary": {"Origin"}}
	for i := range n {
		key := "capacity-" + strconv.Itoa(i)
		body := make([]byte, 1024)
		rand.Read(body)
		if _, err := s.Claim(ctx, idempotency.ClaimParams{Key: key, Owner: "owner-token-0123456789", Fingerprint: "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", Lock: time.Minute}); err != nil {
			t.Fatal(err)
		}
		if err := s.Complete(ctx, idempotency.CompleteParams{Key: key, Owner: "owner-token-0123456789", Response: &idempotency.Response{Status: 201, Header: header, Body: body}, Retention: time.Hour}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := p.Exec(ctx, "VACUUM ANALYZE "+table); err != nil {
		t.Fatal(err)
	}
	var total, heap, indexes int64
	if err := p.QueryRow(ctx, "SELECT pg_total_relation_size($1), pg_table_size($1), pg_indexes_size($1)", table).Scan(&total, &heap, &indexes); err != nil {
		t.Fatal(err)
	}
	t.Logf("PostgreSQL: %d bytes per record (table and TOAST %d, indexes %d; %d records of a 1 KiB body and 6 header fields)",
		total/n, heap/n, indexes/n, n)
}

package mysqlstore_test

import (
	"context"
	"crypto/rand"
	"net/http"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/retryhttp/retryhttp/idempotency"
	"github.com/retryhttp/retryhttp/shared/mysqltest"
)

// Bytes per record on disk (InnoDB's clustered index and secondary
// index, after OPTIMIZE TABLE), for docs/server.md's capacity table: a
// measurement run on demand (RETRYHTTP_CAPACITY=1). The record is a 1 KiB
// body that does not compress, and 6 header fields, as pgstore's and
// redisstore's.
func TestRecordSize(t *testing.T) {
	if os.Getenv("RETRYHTTP_CAPACITY") == "" {
		t.Skip("a measurement: set RETRYHTTP_CAPACITY=1 to run it")
	}
	db := mysqltest.DB(t)
	s, table := newStoreOn(t, db)
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
	if _, err := db.ExecContext(ctx, "OPTIMIZE TABLE "+table); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, "ANALYZE TABLE "+table); err != nil {
		t.Fatal(err)
	}
	var data, index int64
	if err := db.QueryRowContext(ctx, "SELECT data_length, index_length FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name = ?", table).Scan(&data, &index); err != nil {
		t.Fatal(err)
	}
	t.Logf("MariaDB: %d bytes per record (clustered index %d, secondary index %d; %d records of a 1 KiB body and 6 header fields)",
		(data+index)/n, data/n, index/n, n)
}

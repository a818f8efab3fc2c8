package redisstore_test

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

// typicalResponse is the record the capacity table is sized for: a 1 KiB
// body that does not compress, and 6 header fields.
func typicalResponse() *idempotency.Response {
	body := make([]byte, 1024)
	rand.Read(body)
	return &idempotency.Response{Status: 201, Body: body, Header: http.Header{
		"Content-Type": {"application/json"}, "Date": {"Tue, 01 Dec 2026 12:00:00 GMT"}, "Request-Id": {"req_8fJ2kLmN0pQ4rS6t"},
		"Cache-Control": {"no-store"}, "X-Ratelimit-Remaining": {"99"}, "Vary": {"Origin"}}}
}

// Bytes per record, as MEMORY USAGE counts them, for docs/server.md's
// capacity table: a measurement run on demand (RETRYHTTP_CAPACITY=1).
func TestRecordSize(t *testing.T) {
	if os.Getenv("RETRYHTTP_CAPACITY") == "" {
		t.Skip("a measurement: set RETRYHTTP_CAPACITY=1 to run it")
	}
	s := newStore(t)
	c := client(t)
	ctx := context.Background()
	var total int64
	const n = 1000
	for i := range n {
		key := "capacity-" + strconv.Itoa(i)
		if _, err := s.Claim(ctx, idempotency.ClaimParams{Key: key, Owner: "owner-token-0123456789", Fingerprint: "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", Lock: time.Minute}); err != nil {
			t.Fatal(err)
		}
		if err := s.Complete(ctx, idempotency.CompleteParams{Key: key, Owner: "owner-token-0123456789", Response: typicalResponse(), Retention: time.Hour}); err != nil {
			t.Fatal(err)
		}
	}
	keys, err := c.Keys(ctx, "retryhttp-test:*capacity-*").Result()
	if err != nil || len(keys) != n {
		t.Fatalf("%d keys, %v", len(keys), err)
	}
	for _, k := range keys {
		b, err := c.MemoryUsage(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		total += b
	}
	t.Logf("Redis: %d bytes per record (MEMORY USAGE, mean of %d; 1 KiB body, 6 header fields)", total/n, n)
}

package redisstore_test

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/retryhttp/retryhttp/idempotency"
	"github.com/retryhttp/retryhttp/idempotency/redisstore"
)

// BenchmarkClaim: a replay's claim, layer by layer, on completed records:
// the raw GET a replay needs at the least, the claim's one command (SET
// NX GET PX, sent raw), and the Store's Claim (that command, the key's
// prefix, and decoding the record), from 1, 8 and 32 goroutines. ns/op is
// wall time per claim; compare the rows of one run.
func BenchmarkClaim(b *testing.B) {
	ctx := context.Background()
	c := client(b)
	prefix := benchPrefix(b, c)
	s, err := redisstore.New(c, redisstore.Options{Prefix: prefix})
	if err != nil {
		b.Fatal(err)
	}
	const stored = 1000
	keys := make([]string, stored)
	for i := range keys {
		keys[i] = fmt.Sprint("stored-", i)
		if _, err := s.Claim(ctx, idempotency.ClaimParams{Key: keys[i], Fingerprint: "fp", Owner: "o", Lock: time.Minute}); err != nil {
			b.Fatal(err)
		}
		if err := s.Complete(ctx, idempotency.CompleteParams{Key: keys[i], Owner: "o", Retention: time.Hour,
			Response: &idempotency.Response{Status: 201, Header: http.Header{"Content-Type": {"application/json"}, "Location": {"/v1/charges/ch_1"}}, Body: []byte(`{"id":"ch_1"}`)}}); err != nil {
			b.Fatal(err)
		}
	}
	layers := []struct {
		name  string
		claim func(k string) error
	}{
		{"GET", func(k string) error { return c.Get(ctx, prefix+k).Err() }},
		{"SET-NX-GET", func(k string) error {
			return c.SetArgs(ctx, prefix+k, "f|o2|fp", redis.SetArgs{Mode: "NX", TTL: time.Minute, Get: true}).Err()
		}},
		{"Store.Claim", func(k string) error {
			rec, err := s.Claim(ctx, idempotency.ClaimParams{Key: k, Fingerprint: "fp", Owner: "o2", Lock: time.Minute})
			if err == nil && (rec == nil || rec.Response == nil) {
				err = fmt.Errorf("%s: no stored response", k)
			}
			return err
		}},
	}
	for _, conc := range []int{1, 8, 32} {
		for _, l := range layers {
			b.Run(fmt.Sprintf("%s/conc=%d", l.name, conc), func(b *testing.B) {
				var next atomic.Int64
				var wg sync.WaitGroup
				for range conc {
					wg.Go(func() {
						for i := next.Add(1); i <= int64(b.N); i = next.Add(1) {
							if err := l.claim(keys[i%stored]); err != nil {
								b.Error(err)
								return
							}
						}
					})
				}
				wg.Wait()
			})
		}
	}
}

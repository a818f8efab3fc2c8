package redisstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/retryhttp/retryhttp/idempotency"
	"github.com/retryhttp/retryhttp/idempotency/redisstore"
	"github.com/retryhttp/retryhttp/idempotency/storetest"
	"github.com/retryhttp/retryhttp/shared/testenv"
)

// client connects to RETRYHTTP_TEST_REDIS (default 127.0.0.1:6379). When
// Redis cannot be reached the test is skipped with a loud message, and
// fails under CI=true, where the service is part of the contract.
func client(t testing.TB) *redis.Client {
	t.Helper()
	addr := testenv.RedisAddr()
	c := redis.NewClient(&redis.Options{Addr: addr})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		c.Close()
		testenv.Unreachable(t, "Redis", addr, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// newStore gives each test its own key prefix and deletes its keys after.
func newStore(t *testing.T) idempotency.Store {
	c := client(t)
	prefix := "retryhttp-test:" + uuid.NewString() + ":"
	t.Cleanup(func() {
		ctx := context.Background()
		keys, _ := c.Keys(ctx, prefix+"*").Result()
		if len(keys) > 0 {
			c.Del(ctx, keys...)
		}
	})
	s, err := redisstore.New(c, redisstore.Options{Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestConformance(t *testing.T) { storetest.Run(t, newStore) }

// With the replay cache on, the same answers.
func TestConformanceCached(t *testing.T) { storetest.RunCached(t, newStore) }

// The claim script, used on Redis 6.2, keeps the same contract.
func TestConformanceClaimScript(t *testing.T) {
	storetest.Run(t, func(t *testing.T) idempotency.Store {
		s := newStore(t).(*redisstore.Store)
		redisstore.UseClaimScript(s)
		return s
	})
}

func TestNewRejectsNilClient(t *testing.T) {
	if _, err := redisstore.New(nil, redisstore.Options{}); err == nil {
		t.Fatal("want an error")
	}
}

func TestRecordsExpireByRedisTTL(t *testing.T) {
	c := client(t)
	prefix := "retryhttp-test:" + uuid.NewString() + ":"
	s, _ := redisstore.New(c, redisstore.Options{Prefix: prefix})
	ctx := context.Background()
	if _, err := s.Claim(ctx, idempotency.ClaimParams{Key: "k", Fingerprint: "fp", Owner: "o", Lock: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if err := s.Complete(ctx, idempotency.CompleteParams{Key: "k", Owner: "o", Response: &idempotency.Response{Status: 201}, Retention: 42 * time.Second}); err != nil {
		t.Fatal(err)
	}
	ttl, err := c.PTTL(ctx, prefix+"k").Result()
	if err != nil {
		t.Fatal(err)
	}
	if ttl <= 40*time.Second || ttl > 42*time.Second {
		t.Fatalf("TTL after Complete = %v, want the retention of 42s", ttl)
	}
	c.Del(ctx, prefix+"k")
}

func BenchmarkMiddleware(b *testing.B) {
	c := client(b)
	s, _ := redisstore.New(c, redisstore.Options{Prefix: benchPrefix(b, c)})
	storetest.Bench(b, s)
}

// benchPrefix is a key prefix of a benchmark's own, its keys deleted when
// it ends.
func benchPrefix(b *testing.B, c *redis.Client) string {
	prefix := "retryhttp-bench:" + uuid.NewString() + ":"
	b.Cleanup(func() {
		keys, _ := c.Keys(context.Background(), prefix+"*").Result()
		for i := 0; i < len(keys); i += 1000 {
			c.Del(context.Background(), keys[i:min(i+1000, len(keys))]...)
		}
	})
	return prefix
}

// A completed record carries its expiry, from the server's clock, so that
// a replay knows it without asking (a replay cache keeps it until then);
// a record completed by an earlier release, without one, still replays.
func TestCompletedRecordExpiry(t *testing.T) {
	c := client(t)
	prefix := "retryhttp-test:" + uuid.NewString() + ":"
	t.Cleanup(func() {
		keys, _ := c.Keys(context.Background(), prefix+"*").Result()
		if len(keys) > 0 {
			c.Del(context.Background(), keys...)
		}
	})
	s, err := redisstore.New(c, redisstore.Options{Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if rec, err := s.Claim(ctx, idempotency.ClaimParams{Key: "k", Fingerprint: "fp", Owner: "o1", Lock: time.Minute}); err != nil || rec != nil {
		t.Fatalf("claim: %v %v", rec, err)
	}
	before := time.Now()
	if err := s.Complete(ctx, idempotency.CompleteParams{Key: "k", Owner: "o1", Response: &idempotency.Response{Status: 201, Body: []byte("ok")}, Retention: time.Hour}); err != nil {
		t.Fatal(err)
	}
	rec, err := s.Claim(ctx, idempotency.ClaimParams{Key: "k", Fingerprint: "fp", Owner: "o2", Lock: time.Minute})
	if err != nil || rec == nil || rec.Response == nil || string(rec.Response.Body) != "ok" {
		t.Fatalf("replay: %+v %v", rec, err)
	}
	if d := rec.Expires.Sub(before.Add(time.Hour)); d < -5*time.Second || d > 5*time.Second {
		t.Fatalf("the replay's expiry is %v, want about an hour from the completion (%v off)", rec.Expires, d)
	}
	// As an earlier release wrote it: "d|<fingerprint>|<response>".
	if err := c.Set(ctx, prefix+"old", "d|fp|201\n{}\nold", time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	rec, err = s.Claim(ctx, idempotency.ClaimParams{Key: "old", Fingerprint: "fp", Owner: "o3", Lock: time.Minute})
	if err != nil || rec == nil || rec.Response == nil || string(rec.Response.Body) != "old" || !rec.Expires.IsZero() {
		t.Fatalf("an earlier release's record: %+v %v; want its replay, of unknown expiry", rec, err)
	}
}

package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/retryhttp/retryhttp/idempotency"
	"github.com/retryhttp/retryhttp/idempotency/redisstore"
)

// A Redis that can evict records is refused at New, with an error that
// names the setting and the fix; AllowEviction accepts it.
func TestNewRefusesAnEvictingRedis(t *testing.T) {
	for _, policy := range []string{"allkeys-lru", "volatile-lru", "allkeys-random"} {
		t.Run(policy, func(t *testing.T) {
			c, _ := startRedis(t, "--maxmemory", "2mb", "--maxmemory-policy", policy)
			_, err := redisstore.New(c, redisstore.Options{})
			if err == nil || !strings.Contains(err.Error(), "maxmemory-policy is "+policy) || !strings.Contains(err.Error(), "noeviction") {
				t.Fatalf("New on %s: %v, want an error naming the policy and noeviction", policy, err)
			}
			if _, err := redisstore.New(c, redisstore.Options{AllowEviction: true}); err != nil {
				t.Fatalf("with AllowEviction: %v", err)
			}
		})
	}
	c, _ := startRedis(t, "--maxmemory-policy", "noeviction")
	if _, err := redisstore.New(c, redisstore.Options{}); err != nil {
		t.Fatalf("noeviction: %v", err)
	}
}

// A Redis without the append-only file forgets completed keys on a crash:
// New warns of it, naming the setting and the fix, or refuses it with
// RequirePersistence; one with the file is taken without a word.
func TestNewWarnsOfARedisWithoutPersistence(t *testing.T) {
	var logs strings.Builder
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	bare, _ := startRedis(t) // appendonly no, no snapshots
	if _, err := redisstore.New(bare, redisstore.Options{Logger: logger}); err != nil {
		t.Fatalf("New without persistence: %v, want a warning only", err)
	}
	if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), "appendonly yes") {
		t.Errorf("the warning %q does not name the fix", logs.String())
	}
	_, err := redisstore.New(bare, redisstore.Options{RequirePersistence: true})
	if err == nil || !strings.Contains(err.Error(), "appendonly no") {
		t.Errorf("RequirePersistence on a server without it: %v, want an error naming the setting", err)
	}
	logs.Reset()
	durable, _ := startRedis(t, "--appendonly", "yes")
	if _, err := redisstore.New(durable, redisstore.Options{RequirePersistence: true, Logger: logger}); err != nil {
		t.Fatalf("RequirePersistence on a server with the append-only file: %v", err)
	}
	if logs.Len() != 0 {
		t.Errorf("a durable server was warned of: %s", logs.String())
	}
}

// A managed Redis that hides CONFIG still tells its policy in INFO memory.
func TestNewReadsThePolicyWithoutConfig(t *testing.T) {
	c, _ := startRedis(t, "--maxmemory-policy", "allkeys-lru", "--rename-command", "CONFIG", "")
	if err := c.ConfigGet(context.Background(), "maxmemory-policy").Err(); err == nil {
		t.Fatal("CONFIG still answers; the test needs it hidden")
	}
	if _, err := redisstore.New(c, redisstore.Options{}); err == nil || !strings.Contains(err.Error(), "allkeys-lru") {
		t.Fatalf("New: %v, want the policy read from INFO and refused", err)
	}
	ok, _ := startRedis(t, "--rename-command", "CONFIG", "")
	if _, err := redisstore.New(ok, redisstore.Options{}); err != nil {
		t.Fatalf("noeviction behind a hidden CONFIG: %v", err)
	}
}

// fill writes unrelated values, in pipelines of small ones so that even
// a small write no longer fits, until the server refuses them (noeviction:
// it is full) or n bytes were written (an evicting policy).
// fillUntilFull fills c until a write of a few bytes is refused.
func fillUntilFull(t *testing.T, c *redis.Client) {
	t.Helper()
	for try := 0; ; try++ {
		fill(t, c, 64<<20)
		err := c.Set(context.Background(), "one-more", "x", 0).Err()
		if err != nil && strings.HasPrefix(err.Error(), "OOM ") {
			return
		}
		if try == 10 {
			t.Fatalf("the server is not full: %v", err)
		}
	}
}

func fill(t *testing.T, c *redis.Client, n int) {
	ctx := context.Background()
	v := strings.Repeat("x", 64)
	for i := 0; i*len(v) < n; {
		p := c.Pipeline()
		for range 1000 {
			p.Set(ctx, fmt.Sprint("junk:", i), v, 0)
			i++
		}
		_, err := p.Exec(ctx)
		switch {
		case err == nil:
		case strings.HasPrefix(err.Error(), "OOM "):
			return
		default:
			t.Fatal(err)
		}
	}
}

// With AllowEviction, the records Redis evicts are counted when the Store
// finds them gone.
func TestEvictedClaimsAreCounted(t *testing.T) {
	c, _ := startRedis(t, "--maxmemory", "2mb", "--maxmemory-policy", "allkeys-lru")
	s, err := redisstore.New(c, redisstore.Options{AllowEviction: true, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	const n = 100
	for i := range n {
		if _, err := s.Claim(ctx, idempotency.ClaimParams{Key: fmt.Sprint("k", i), Fingerprint: "fp", Owner: "o", Lock: time.Hour}); err != nil {
			t.Fatal(err)
		}
	}
	fill(t, c, 8<<20)
	lost := 0
	for i := range n {
		if err := s.Complete(ctx, idempotency.CompleteParams{Key: fmt.Sprint("k", i), Owner: "o", Response: &idempotency.Response{Status: 201}, Retention: time.Hour}); errors.Is(err, idempotency.ErrNotOwner) {
			lost++
		} else if err != nil {
			t.Fatal(err)
		}
	}
	if lost == 0 {
		t.Fatal("no claim was evicted; the test did not fill the server")
	}
	if got := s.Vanished(); got != uint64(lost) {
		t.Fatalf("Vanished() = %d, want the %d evicted claims", got, lost)
	}
}

// A full noeviction Redis refuses new keys but still replays completed
// ones: the refused claim falls back to a read.
func TestFullRedisStillReplays(t *testing.T) {
	c, _ := startRedis(t, "--maxmemory", "3mb", "--maxmemory-policy", "noeviction")
	s, err := redisstore.New(c, redisstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ch := &charge{}
	url := serveStore(t, s, ch, time.Second)
	const n = 50
	for i := range n {
		if code, body := post(t, url, fmt.Sprint("full-", i)); code != 201 {
			t.Fatalf("key %d: %d %s", i, code, body)
		}
	}
	fillUntilFull(t, c)
	for i := range n {
		if code, body := post(t, url, fmt.Sprint("full-", i)); code != 201 || !strings.Contains(body, fmt.Sprintf(`"id":%d`, i+1)) {
			t.Fatalf("replay of key %d on a full Redis: %d %s, want the stored 201", i, code, body)
		}
	}
	// Redis shrinks idle clients' buffers about once a second, which can
	// free a few kilobytes while the replays run: full again, at once.
	fillUntilFull(t, c)
	if code, _ := post(t, url, "new-on-full"); code != 503 {
		t.Fatalf("a new key on a full Redis: %d, want 503", code)
	}
	if got := ch.n.Load(); got != n {
		t.Fatalf("%d charges, want %d", got, n)
	}
}

// What the package doc says of persistence: a Redis killed with SIGKILL
// keeps its completed records with the append-only file, and forgets them
// with RDB snapshots at their default save points.
func TestPersistenceAcrossAKill(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		kept bool
	}{
		{"appendonly, appendfsync always", []string{"--appendonly", "yes", "--appendfsync", "always"}, true},
		{"RDB snapshots only", []string{"--save", "3600 1 300 100 60 10000"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, srv := startRedis(t, tc.args...)
			s, err := redisstore.New(c, redisstore.Options{})
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			const n = 20
			for i := range n {
				k := fmt.Sprint("k", i)
				if _, err := s.Claim(ctx, idempotency.ClaimParams{Key: k, Fingerprint: "fp", Owner: "o", Lock: time.Minute}); err != nil {
					t.Fatal(err)
				}
				if err := s.Complete(ctx, idempotency.CompleteParams{Key: k, Owner: "o", Response: &idempotency.Response{Status: 201}, Retention: time.Hour}); err != nil {
					t.Fatal(err)
				}
			}
			srv.restart()
			kept := 0
			for i := range n {
				rec, err := s.Claim(ctx, idempotency.ClaimParams{Key: fmt.Sprint("k", i), Fingerprint: "fp", Owner: "o2", Lock: time.Minute})
				if err != nil {
					t.Fatal(err)
				}
				if rec != nil && rec.Response != nil {
					kept++
				}
			}
			if tc.kept && kept != n || !tc.kept && kept == n {
				t.Fatalf("%d of %d completed records survived the kill", kept, n)
			}
			t.Logf("%d of %d completed records survived the kill", kept, n)
		})
	}
}

package redisstore_test

// Fault tests on a real Redis, through a TCP proxy that lets
// a command through and loses its reply, or cuts every connection.

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/retryhttp/retryhttp/idempotency"
	"github.com/retryhttp/retryhttp/idempotency/redisstore"
	"github.com/retryhttp/retryhttp/idempotency/storetest"
	"github.com/retryhttp/retryhttp/shared/faultproxy"
	"github.com/retryhttp/retryhttp/shared/testenv"
)

// proxied returns a store whose client reaches Redis through a fault proxy.
func proxied(t *testing.T, maxRetries int) (*redisstore.Store, *faultproxy.Proxy) {
	client(t) // skips or fails loudly when Redis is unreachable
	proxy := faultproxy.Start(t, testenv.RedisAddr())
	c := redis.NewClient(&redis.Options{Addr: proxy.Addr(), MaxRetries: maxRetries, PoolSize: 1})
	t.Cleanup(func() { c.Close() })
	if err := c.Ping(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	prefix := "retryhttp-test:" + uuid.NewString() + ":"
	t.Cleanup(func() {
		direct := client(t)
		keys, _ := direct.Keys(context.Background(), prefix+"*").Result()
		if len(keys) > 0 {
			direct.Del(context.Background(), keys...)
		}
	})
	s, err := redisstore.New(c, redisstore.Options{Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	// Load the scripts, so that the next claim is one EVALSHA.
	if _, err := s.Claim(context.Background(), idempotency.ClaimParams{Key: "warm-up", Fingerprint: "fp", Owner: "o", Lock: time.Second}); err != nil {
		t.Fatal(err)
	}
	for _, f := range []func() error{
		func() error {
			return s.Complete(context.Background(), idempotency.CompleteParams{Key: "warm-up", Owner: "o", Response: &idempotency.Response{Status: 200}, Retention: time.Second})
		},
		func() error {
			_ = s.Extend(context.Background(), idempotency.ExtendParams{Key: "warm-up", Owner: "o", Lock: time.Second})
			return nil
		},
		func() error {
			return s.Release(context.Background(), idempotency.ReleaseParams{Key: "warm-up", Owner: "o"})
		},
	} {
		if err := f(); err != nil {
			t.Fatal(err)
		}
	}
	return s, proxy
}

type charge struct{ n atomic.Int32 }

func (c *charge) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := c.n.Add(1)
	w.WriteHeader(http.StatusCreated)
	fmt.Fprintf(w, `{"id":%d}`, n)
}

func serveStore(t *testing.T, s idempotency.Store, h http.Handler, lock time.Duration) string {
	m, err := idempotency.New(idempotency.Options{Store: s, LockTimeout: lock, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(m.Handler(h))
	t.Cleanup(srv.Close)
	return srv.URL
}

func post(t *testing.T, url, key string) (int, string) {
	req, _ := http.NewRequest("POST", url+"/charges", strings.NewReader(`{"amount":1}`))
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

// With go-redis's own retries (the default): the claim ran, its
// reply was lost, go-redis sent it again and got the request's own claim
// back: the handler runs, no 409.
func TestClaimReplyLostRetriedByClient(t *testing.T) {
	s, proxy := proxied(t, 3)
	storetest.RunLostReply(t, s, proxy.LoseNextReply, true)
}

// With go-redis retries off: 503, and the claim is released, so the
// retry runs without waiting for LockTimeout.
func TestClaimReplyLostNoClientRetries(t *testing.T) {
	s, proxy := proxied(t, -1)
	storetest.RunLostReply(t, s, proxy.LoseNextReply, false)
}

// The connection dies under the handler; Complete meets it and is
// tried again on a new one. The retry after LockTimeout is a replay.
func TestConnectionCutBeforeComplete(t *testing.T) {
	s, proxy := proxied(t, -1)
	var charges atomic.Int32
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		charges.Add(1)
		proxy.CutAll()
		w.WriteHeader(http.StatusCreated)
	})
	url := serveStore(t, s, h, time.Second)
	if code, _ := post(t, url, "cut-1"); code != 201 {
		t.Fatalf("first: %d", code)
	}
	time.Sleep(1500 * time.Millisecond)
	if code, _ := post(t, url, "cut-1"); code != 201 || charges.Load() != 1 {
		t.Fatalf("retry after LockTimeout: %d, %d charges; want a replay and 1 charge", code, charges.Load())
	}
}

// A partition between one instance and Redis while its handler runs: its
// extensions get no answer, its claim lapses, and a retry reaches another
// instance, which takes the key. The first instance's handler is told to
// stop before the claim can lapse, so the charge happens once.
func TestPartitionedHandlerStopsBeforeItsClaimLapses(t *testing.T) {
	partitioned, proxy := proxied(t, -1)
	defer proxy.Heal()
	storetest.RunPartition(t, partitioned, partitioned.WithClient(client(t)), proxy.Stall)
}

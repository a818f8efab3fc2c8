package redispacer_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/retryhttp/retryhttp"
	"github.com/retryhttp/retryhttp/overload"
	"github.com/retryhttp/retryhttp/redispacer"
	"github.com/retryhttp/retryhttp/shared/faultproxy"
)

// Through a Redis that goes down, then stalls, then comes back: while it
// is out, requests go unpaced (sent, never refused or held past the
// Store's Timeout) and the failure is logged once; once it is back, the
// quota it kept paces them again.
func TestPacerThroughARedisOutage(t *testing.T) {
	_, c, prefix := newStore(t, redispacer.Options{})
	proxy := faultproxy.Start(t, c.Options().Addr)
	rdb := redis.NewClient(&redis.Options{Addr: proxy.Addr(), ContextTimeoutEnabled: true, MaxRetries: -1})
	defer rdb.Close()
	store, err := redispacer.New(rdb, redispacer.Options{Prefix: prefix, Timeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	var logged strings.Builder
	pacer := &retryhttp.Pacer{Store: store, MaxWait: time.Second, Logger: slog.New(slog.NewTextHandler(&logged, nil))}
	q := &quotaHandler{n: 5, window: time.Hour, start: time.Now(), dialect: "github"}
	srv := httptest.NewServer(q)
	defer srv.Close()
	client := &http.Client{Transport: &retryhttp.Transport{Pacer: pacer, Policy: retryhttp.Policy{MaxAttempts: 1}, Logger: slog.New(slog.DiscardHandler)}}
	// get sends one critical request (not spread over the hour): whether
	// the Pacer refused it, and how long it took.
	get := func() (paced bool, took time.Duration) {
		ctx := overload.WithPriority(context.Background(), overload.Critical)
		req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/items", nil)
		start := time.Now()
		resp, err := client.Do(req)
		took = time.Since(start)
		var re *retryhttp.RetryError
		if errors.As(err, &re) && re.Reason == retryhttp.ReasonPaced {
			return true, took
		}
		if err != nil {
			t.Fatalf("a request failed: %v", err)
		}
		resp.Body.Close()
		return false, took
	}
	// The Pacer finds a host's headers within a few responses (it looks
	// for one name a response until it has), and in a 429 at once: the
	// quota of 5 is served, and at most one request past it is sent.
	for sent := 0; ; sent++ {
		if paced, _ := get(); paced {
			break
		}
		if sent == 6 {
			t.Fatal("7 requests on a quota of 5 sent, none refused")
		}
	}
	if q.served.Load() != 5 || q.rejected.Load() > 1 {
		t.Fatalf("%d served, %d 429s: want the quota of 5 served and at most one 429", q.served.Load(), q.rejected.Load())
	}
	for _, fault := range []struct {
		name  string
		start func()
	}{{"down", proxy.Refuse}, {"stalled", proxy.Stall}} {
		fault.start()
		sent := q.rejected.Load()
		for range 3 {
			paced, took := get()
			if paced {
				t.Fatalf("Redis %s: a request was refused for a quota the Pacer could not read", fault.name)
			}
			if took > 3*time.Second {
				t.Fatalf("Redis %s: a request took %v with a 200 ms Store Timeout", fault.name, took)
			}
		}
		if got := q.rejected.Load() - sent; got != 3 {
			t.Fatalf("Redis %s: %d requests reached the server, want the 3 sent unpaced", fault.name, got)
		}
		proxy.Heal()
	}
	if n := strings.Count(logged.String(), "Store failed"); n != 1 {
		t.Fatalf("the Store's failure logged %d times, want once:\n%s", n, logged.String())
	}
	// Back: the quota Redis kept (spent until the hour's end) paces
	// again, once the client has reconnected.
	pacedWithin := func(what string) {
		t.Helper()
		for i := 0; ; i++ {
			if paced, _ := get(); paced {
				return
			}
			if i == 5 {
				t.Fatalf("%s: 5 requests later, still unpaced", what)
			}
		}
	}
	pacedWithin("Redis back")
	// Redis loses the quota (evicted, or restarted without persistence):
	// the next response tells it again.
	keys, err := c.Keys(context.Background(), prefix+"*").Result()
	if err != nil || len(keys) == 0 {
		t.Fatalf("the quota's key: %v %v", keys, err)
	}
	c.Del(context.Background(), keys...)
	pacedWithin("the quota's key lost")
}

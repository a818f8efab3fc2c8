package redispacer_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/retryhttp/retryhttp/redispacer"
	"github.com/retryhttp/retryhttp/shared/testenv"
)

// newStore connects to the tests' Redis (skipping loudly where there is
// none, failing under CI=true) and gives the test a key prefix of its
// own, whose keys are deleted when it ends.
func newStore(t *testing.T, o redispacer.Options) (s *redispacer.Store, c *redis.Client, prefix string) {
	t.Helper()
	addr := testenv.RedisAddr()
	c = redis.NewClient(&redis.Options{Addr: addr})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		c.Close()
		testenv.Unreachable(t, "Redis", addr, err)
	}
	o.Prefix = fmt.Sprintf("redispacer-test:%d:", time.Now().UnixNano())
	t.Cleanup(func() {
		if keys, _ := c.Keys(context.Background(), o.Prefix+"*").Result(); len(keys) > 0 {
			c.Del(context.Background(), keys...)
		}
		c.Close()
	})
	s, err := redispacer.New(c, o)
	if err != nil {
		t.Fatal(err)
	}
	return s, c, o.Prefix
}

// Updates from many processes at once lose none: 16 goroutines on 4
// clients of their own add 1 to one counter 50 times each, and the
// counter ends at the sum.
func TestUpdateLosesNoUpdate(t *testing.T) {
	s, c, prefix := newStore(t, redispacer.Options{Timeout: 30 * time.Second})
	stores := []*redispacer.Store{s}
	for range 3 {
		other := redis.NewClient(&redis.Options{Addr: c.Options().Addr})
		defer other.Close()
		st, err := redispacer.New(other, redispacer.Options{Prefix: prefix, Timeout: 30 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		stores = append(stores, st)
	}
	const key, per = "https://api.test", 50
	var wg sync.WaitGroup
	errs := make(chan error, 16*per)
	for i := range 16 {
		st := stores[i%len(stores)]
		wg.Go(func() {
			for range per {
				errs <- st.Update(context.Background(), key, func(old []byte) []byte {
					n, _ := strconv.Atoi(string(old))
					return strconv.AppendInt(nil, int64(n+1), 10)
				})
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	var got []byte
	if err := s.Update(context.Background(), key, func(old []byte) []byte { got = old; return old }); err != nil {
		t.Fatal(err)
	}
	if string(got) != strconv.Itoa(16*per) {
		t.Fatalf("counter %q after %d updates", got, 16*per)
	}
}

// A key expires its TTL after its last update; nil is what a key never
// written reads as.
func TestUpdateSetsTTL(t *testing.T) {
	for _, ttl := range []time.Duration{0, 5 * time.Second, 2 * time.Hour} {
		t.Run(fmt.Sprint(ttl), func(t *testing.T) {
			s, c, prefix := newStore(t, redispacer.Options{TTL: ttl})
			first := []byte("unset")
			if err := s.Update(context.Background(), "k", func(old []byte) []byte { first = old; return []byte("v") }); err != nil {
				t.Fatal(err)
			}
			if first != nil {
				t.Fatalf("a key never written read as %q, want nil", first)
			}
			want := ttl
			if want == 0 {
				want = redispacer.DefaultTTL
			}
			pttl, err := c.PTTL(context.Background(), prefix+"k").Result()
			if err != nil {
				t.Fatal(err)
			}
			if pttl > want || pttl < want-time.Second {
				t.Fatalf("TTL %v, want %v", pttl, want)
			}
		})
	}
}

func TestNewRejectsBadOptions(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer c.Close()
	if _, err := redispacer.New(nil, redispacer.Options{}); err == nil {
		t.Error("New accepted a nil client")
	}
	for _, o := range []redispacer.Options{{Timeout: -1}, {TTL: -time.Second}, {TTL: time.Microsecond}} {
		if _, err := redispacer.New(c, o); err == nil {
			t.Errorf("New accepted %+v", o)
		}
	}
	if _, err := redispacer.New(c, redispacer.Options{Prefix: "p:", Timeout: time.Second, TTL: time.Hour}); err != nil {
		t.Errorf("New refused good options: %v", err)
	}
}

// A Redis that is down, or that accepts and never answers, fails the
// update within the Timeout (a margin for a busy machine), and f's result
// is not taken for stored.
func TestUpdateFailsWithinTimeout(t *testing.T) {
	stalled, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer stalled.Close()
	var conns []net.Conn
	var mu sync.Mutex
	go func() {
		for {
			c, err := stalled.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c) // held open, never answered
			mu.Unlock()
		}
	}()
	defer func() {
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
	}()
	down, _ := net.Listen("tcp", "127.0.0.1:0")
	downAddr := down.Addr().String()
	down.Close()
	for _, tc := range []struct {
		name string
		opt  redis.Options
	}{
		{"down", redis.Options{Addr: downAddr}},
		// The Timeout reaches the read through the context.
		{"stalled", redis.Options{Addr: stalled.Addr().String(), ContextTimeoutEnabled: true}},
		// A client that ignores contexts: its ReadTimeout bounds it.
		{"stalled, ReadTimeout", redis.Options{Addr: stalled.Addr().String(), ReadTimeout: 100 * time.Millisecond}},
	} {
		name := tc.name
		t.Run(name, func(t *testing.T) {
			tc.opt.MaxRetries = -1
			c := redis.NewClient(&tc.opt)
			defer c.Close()
			s, err := redispacer.New(c, redispacer.Options{Timeout: 100 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			err = s.Update(context.Background(), "k", func([]byte) []byte { return []byte("v") })
			if err == nil {
				t.Fatal("Update succeeded against a Redis that is " + name)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Fatalf("Update took %v with a 100 ms Timeout", d)
			}
			var ne net.Error
			if name != "down" && !errors.Is(err, context.DeadlineExceeded) && !(errors.As(err, &ne) && ne.Timeout()) {
				t.Fatalf("err %v: want a timeout", err)
			}
		})
	}
}

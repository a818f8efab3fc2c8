package redispacer_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/retryhttp/retryhttp/redispacer"
	"github.com/retryhttp/retryhttp/shared/testenv"
)

// BenchmarkUpdateOneKey is the cost of one update of one host's quota
// from many goroutines on 4 clients at once, as a fleet's processes make
// them: a read, a compare-and-set, and the rounds lost to the others.
func BenchmarkUpdateOneKey(b *testing.B) {
	addr := testenv.RedisAddr()
	var stores []*redispacer.Store
	prefix := "redispacer-bench:" + strconv.FormatInt(int64(b.N), 10) + ":"
	for range 4 {
		c := redis.NewClient(&redis.Options{Addr: addr})
		defer c.Close()
		if err := c.Ping(context.Background()).Err(); err != nil {
			testenv.Unreachable(b, "Redis", addr, err)
		}
		s, err := redispacer.New(c, redispacer.Options{Prefix: prefix})
		if err != nil {
			b.Fatal(err)
		}
		stores = append(stores, s)
	}
	defer func() {
		c := redis.NewClient(&redis.Options{Addr: addr})
		c.Del(context.Background(), prefix+"k")
		c.Close()
	}()
	var next atomic.Int64
	b.SetParallelism(4)
	b.RunParallel(func(pb *testing.PB) {
		s := stores[int(next.Add(1))%len(stores)]
		for pb.Next() {
			if err := s.Update(context.Background(), "k", func(old []byte) []byte { return append(old[:0:0], 'x') }); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

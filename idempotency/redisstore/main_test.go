package redisstore_test

import (
	"testing"

	"go.uber.org/goleak"
)

// go-redis redials a node that died (the failover test kills a master)
// from a goroutine that sleeps a second between tries and notices its pool
// is closed only when it wakes; it is go-redis's, and ends on its own.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("github.com/redis/go-redis/v9/internal/pool.(*ConnPool).tryDial"))
}

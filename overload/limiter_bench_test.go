package overload_test

import (
	"context"
	"testing"

	"github.com/retryhttp/retryhttp/overload"
)

// What a call admitted and ended costs, the latency read and the limit
// moved included, with nothing else in flight and with other goroutines
// using the same key.
func BenchmarkAcquireDone(b *testing.B) {
	lim := (&overload.Limiter{}).For("k")
	ctx := context.Background()
	b.Run("alone", func(b *testing.B) {
		for b.Loop() {
			p, err := lim.Acquire(ctx)
			if err != nil {
				b.Fatal(err)
			}
			p.Done(false)
		}
	})
	b.Run("parallel", func(b *testing.B) {
		l := (&overload.Limiter{}).For("p")
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				p, err := l.Acquire(ctx)
				if err == nil {
					p.Done(false)
				}
			}
		})
	})
}

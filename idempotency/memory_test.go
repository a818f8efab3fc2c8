package idempotency_test

import (
	"testing"

	"github.com/retryhttp/retryhttp/idempotency"
	"github.com/retryhttp/retryhttp/idempotency/storetest"
)

func newMemoryStore(t *testing.T) idempotency.Store {
	s, err := idempotency.NewMemoryStore(0)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestMemoryStoreConformance(t *testing.T) { storetest.Run(t, newMemoryStore) }

// With the replay cache on, the same answers.
func TestMemoryStoreConformanceCached(t *testing.T) { storetest.RunCached(t, newMemoryStore) }

func BenchmarkMiddleware(b *testing.B) {
	s, _ := idempotency.NewMemoryStore(0)
	storetest.Bench(b, s)
}

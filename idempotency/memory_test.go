package idempotency_test

import (
	"testing"

	"github.com/retryhttp/retryhttp/idempotency"
	"github.com/retryhttp/retryhttp/idempotency/storetest"
)

func TestMemoryStoreConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) idempotency.Store { return idempotency.NewMemoryStore(0) })
}

func BenchmarkMiddleware(b *testing.B) { storetest.Bench(b, idempotency.NewMemoryStore(0)) }

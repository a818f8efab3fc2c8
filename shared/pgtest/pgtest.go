// Package pgtest connects the tests of several modules to the tests'
// PostgreSQL.
package pgtest

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/retryhttp/retryhttp/shared/testenv"
)

// Pool connects to testenv.PostgresDSN, closed when the test ends. A
// server that cannot be reached within a few seconds skips the test
// loudly, or fails it under CI=true (testenv.Unreachable).
func Pool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	dsn := testenv.PostgresDSN()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	p, err := pgxpool.New(ctx, dsn)
	if err == nil {
		err = p.Ping(ctx)
	}
	if err != nil {
		if p != nil {
			p.Close()
		}
		testenv.Unreachable(t, "PostgreSQL", dsn, err)
	}
	t.Cleanup(p.Close)
	return p
}

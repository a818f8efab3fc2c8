// Package mysqltest connects the tests of several modules to the tests'
// MySQL or MariaDB.
package mysqltest

import (
	"context"
	"database/sql"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql" // the "mysql" driver

	"github.com/retryhttp/retryhttp/shared/testenv"
)

// DB opens testenv.MySQLDSN, closed when the test ends. A server that
// cannot be reached within a few seconds skips the test loudly, or fails
// it under CI=true (testenv.Unreachable).
func DB(t testing.TB) *sql.DB {
	t.Helper()
	return Open(t, testenv.MySQLDSN())
}

// Open opens dsn, closed when the test ends; an unreachable server is
// reported as DB reports it.
func Open(t testing.TB, dsn string) *sql.DB {
	t.Helper()
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		testenv.Unreachable(t, "MySQL", dsn, err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

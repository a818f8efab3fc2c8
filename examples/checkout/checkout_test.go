package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// unreachable skips the test loudly, and fails it under CI=true, where the
// services are part of the contract.
func unreachable(t *testing.T, service, addr string, err error) {
	t.Helper()
	msg := fmt.Sprintf("!!! %s at %s is unreachable (%v): the example's test did NOT run", service, addr, err)
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

func services(t *testing.T) (*pgxpool.Pool, *redis.Client) {
	ctx := context.Background()
	dsn := envOr("RETRYHTTP_TEST_POSTGRES", defaultPostgres)
	pool, err := pgxpool.New(ctx, dsn)
	if err == nil {
		err = pool.Ping(ctx)
	}
	if err != nil {
		unreachable(t, "PostgreSQL", dsn, err)
	}
	t.Cleanup(pool.Close)
	addr := envOr("RETRYHTTP_TEST_REDIS", defaultRedis)
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { rdb.Close() })
	if err := rdb.Ping(ctx).Err(); err != nil {
		unreachable(t, "Redis", addr, err)
	}
	return pool, rdb
}

// TestIncident is the example's run as a test: 1,000 orders with faults at
// every hop. Each layer on its own charges and mails some orders twice;
// with the cross-layer pieces every order is charged once and mailed once.
func TestIncident(t *testing.T) {
	pool, rdb := services(t)
	cfg := Incident(1000, 32, 1, pool, rdb)
	without, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("each layer on its own: %+v", without)
	if without.ChargeDups == 0 || without.EmailDups == 0 {
		t.Errorf("without the pieces: %d orders charged twice, %d mailed twice; the faults should cause some", without.ChargeDups, without.EmailDups)
	}
	cfg.Pieces = true
	with, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("with the pieces: %+v", with)
	if !with.ExactlyOnce() {
		t.Fatalf("with the pieces: %+v, want every order charged once and mailed once", with)
	}
}

func TestFlags(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"-orders", "0"}, &out, &errb); code != 2 || !strings.Contains(errb.String(), "must be positive") {
		t.Fatalf("exit %d, %q", code, errb.String())
	}
}

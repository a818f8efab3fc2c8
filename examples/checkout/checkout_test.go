package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if os.Getenv(consumerRole) != "" { // a fulfilment consumer the incident started
		os.Exit(consume(os.Args[1:], os.Stderr))
	}
	goleak.VerifyTestMain(m)
}

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
	url := envOr("RETRYHTTP_TEST_NATS", defaultNATS)
	nc, err := nats.Connect(url, nats.Timeout(2*time.Second))
	if err != nil {
		unreachable(t, "NATS", url, err)
	}
	nc.Close()
	return pool, rdb
}

// TestIncident is the example's run as a test: 1,000 orders with faults at
// every hop, the fulfilment consumer killed with SIGKILL while it works.
// Each layer on its own charges, mails and ships some orders twice; with
// the cross-layer pieces every order is charged, mailed and shipped once.
func TestIncident(t *testing.T) {
	pool, rdb := services(t)
	cfg := Incident(1000, 32, 1, pool, rdb, envOr("RETRYHTTP_TEST_REDIS", defaultRedis), envOr("RETRYHTTP_TEST_NATS", defaultNATS))
	without, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("each layer on its own: %+v", without)
	if without.ChargeDups == 0 || without.EmailDups == 0 || without.ShipDups == 0 {
		t.Errorf("without the pieces: %d orders charged twice, %d mailed twice, %d shipped twice; the faults should cause some",
			without.ChargeDups, without.EmailDups, without.ShipDups)
	}
	cfg.Pieces = true
	with, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("with the pieces: %+v", with)
	if !with.ExactlyOnce(true) || with.ConsumersKilled == 0 {
		t.Fatalf("with the pieces: %+v, want every order charged, mailed and shipped once, with consumers killed", with)
	}
}

func TestFlags(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"-orders", "0"}, &out, &errb); code != 2 || !strings.Contains(errb.String(), "must be positive") {
		t.Fatalf("exit %d, %q", code, errb.String())
	}
}

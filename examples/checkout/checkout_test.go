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
	"github.com/retryhttp/retryhttp/shared/kafkatest"
	"github.com/retryhttp/retryhttp/shared/natstest"
	"github.com/retryhttp/retryhttp/shared/pgtest"
	"github.com/retryhttp/retryhttp/shared/testenv"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if os.Getenv(consumerRole) != "" { // a fulfilment consumer the incident started
		os.Exit(consume(os.Args[1:], os.Stderr))
	}
	code := kafkatest.Main(m)
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}
	os.Exit(code)
}

// services connects to the tests' PostgreSQL and Redis, and checks their
// NATS with JetStream; one that cannot be reached skips the test loudly,
// or fails it under CI=true.
func services(t *testing.T) (*pgxpool.Pool, *redis.Client) {
	pool, rdb := stores(t)
	natstest.JetStream(t)
	return pool, rdb
}

// stores connects to the tests' PostgreSQL and Redis.
func stores(t *testing.T) (*pgxpool.Pool, *redis.Client) {
	pool := pgtest.Pool(t)
	rdb := redis.NewClient(&redis.Options{Addr: testenv.RedisAddr()})
	t.Cleanup(func() { rdb.Close() })
	if err := rdb.Ping(context.Background()).Err(); err != nil {
		testenv.Unreachable(t, "Redis", testenv.RedisAddr(), err)
	}
	return pool, rdb
}

// TestIncident is the example's run as a test: 1,000 orders with faults at
// every hop, the fulfilment consumer killed with SIGKILL while it works.
// Each layer on its own charges, mails and ships some orders twice; with
// the cross-layer pieces every order is charged, mailed and shipped once.
func TestIncident(t *testing.T) {
	pool, rdb := services(t)
	cfg := Incident(1000, 32, 1, pool, rdb, testenv.RedisAddr(), testenv.NATSURL())
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

// The same incident with its third layer on Kafka (a kfake broker of the
// test's own): the outbox relays "order placed" to a topic through
// kafkaoutbox, and the fulfilment consumers, group members killed with
// SIGKILL while they ship, run each event once per order through
// queue/kafka.
func TestIncidentOnKafka(t *testing.T) {
	if raceEnabled {
		t.Skip("many processes for seconds: CI runs it without the race detector")
	}
	pool, rdb := stores(t)
	b := kafkatest.Start(t, 4)
	cfg := Incident(1000, 32, 1, pool, rdb, testenv.RedisAddr(), "")
	cfg.Kafka = b.Addr
	without, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("each layer on its own: %+v", without)
	if without.ShipDups == 0 {
		t.Errorf("without the pieces: %d orders shipped twice; the kills should cause some", without.ShipDups)
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

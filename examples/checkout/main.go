// Command checkout plays the founding incident: a payment provider
// flickers, and a checkout built from layers that each retry on their own
// charges and mails some customers twice. It runs the same traffic and the
// same faults twice, without the cross-layer pieces and with them (keys
// derived from the inbound request, the receipt through a transactional
// outbox), and prints the charges and the receipt emails per order.
//
//	go run ./examples/checkout            # 1,000 orders, about 10 s
//	go run ./examples/checkout -orders 5000
//
// The third layer: the checkout publishes "order placed" through the
// outbox to NATS JetStream, or with -kafka to a Kafka topic (with the
// pieces; straight away without them), and a fulfilment consumer, a
// process of its own that is killed with SIGKILL while it works, calls a
// shipping provider for each event: with the pieces, through queue/natsjs
// or queue/kafka under the order as its key, with keys derived from it.
//
//	go run ./examples/checkout -kafka localhost:9092
//
// It needs the PostgreSQL, Redis and NATS the tests use
// (RETRYHTTP_TEST_POSTGRES, RETRYHTTP_TEST_REDIS, RETRYHTTP_TEST_NATS; by
// default the local servers); -nats "" leaves the third layer out.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
)

func main() {
	if os.Getenv(consumerRole) != "" { // a fulfilment consumer this program started
		os.Exit(consume(os.Args[1:], os.Stderr))
	}
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("checkout", flag.ContinueOnError)
	fs.SetOutput(stderr)
	orders := fs.Int("orders", 1000, "orders to place")
	conc := fs.Int("concurrency", 32, "customers checking out at once")
	seed := fs.Uint64("seed", 1, "seed of the faults")
	pgDSN := fs.String("postgres", envOr("RETRYHTTP_TEST_POSTGRES", defaultPostgres), "PostgreSQL to use")
	redisAddr := fs.String("redis", envOr("RETRYHTTP_TEST_REDIS", defaultRedis), "Redis to use")
	natsURL := fs.String("nats", envOr("RETRYHTTP_TEST_NATS", defaultNATS), `NATS with JetStream for the third layer; "" leaves it out`)
	kafkaAddr := fs.String("kafka", "", "a Kafka broker (host:port) for the third layer, instead of NATS")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *orders <= 0 || *conc <= 0 {
		fmt.Fprintln(stderr, "checkout: -orders and -concurrency must be positive")
		return 2
	}
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, *pgDSN)
	if err == nil {
		err = pool.Ping(ctx)
	}
	if err != nil {
		fmt.Fprintf(stderr, "checkout: PostgreSQL at %s: %v\n", *pgDSN, err)
		return 1
	}
	defer pool.Close()
	rdb := redis.NewClient(&redis.Options{Addr: *redisAddr})
	defer rdb.Close()
	if err := rdb.Ping(ctx).Err(); err != nil {
		fmt.Fprintf(stderr, "checkout: Redis at %s: %v\n", *redisAddr, err)
		return 1
	}
	cfg := Incident(*orders, *conc, *seed, pool, rdb, *redisAddr, *natsURL)
	if *kafkaAddr != "" {
		cfg.NATS, cfg.Kafka = "", *kafkaAddr
	}
	fmt.Fprintf(stdout, "%d orders, %d at a time. Faults: %.0f%% of checkout answers lost, %.0f%% of checkouts crash between the\n"+
		"provider call and their commit, %.0f%% of provider, mail and shipping answers lost, a %v provider and shipping flicker\n"+
		"(its 30 s, compressed), the outbox relay killed every %v", cfg.Orders, cfg.Concurrency, 100*cfg.DropClient, 100*cfg.Crash,
		100*cfg.DropProvider, cfg.Flicker, cfg.RelayCrashes)
	if cfg.thirdLayer() {
		fmt.Fprintf(stdout, ", the fulfilment consumer (on %s) killed with SIGKILL every %v to %v", cfg.broker(), cfg.ConsumerKills, 2*cfg.ConsumerKills)
	}
	fmt.Fprint(stdout, ".\n\n")
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "\tcharges\tcharged twice+\temails\tmailed twice+\tnot mailed\tshipments\tshipped twice+\tnot shipped\tconsumers killed\tfailed orders\tprovider calls\ttime\t")
	ok := true
	for _, pieces := range []bool{false, true} {
		cfg.Pieces = pieces
		start := time.Now()
		res, err := Run(ctx, cfg)
		if err != nil {
			fmt.Fprintf(stderr, "checkout: %v\n", err)
			return 1
		}
		name := "each layer on its own"
		if pieces {
			name = "with the cross-layer pieces"
			ok = res.ExactlyOnce(cfg.thirdLayer())
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%v\t\n", name, res.Charges, res.ChargeDups, res.Emails, res.EmailDups,
			res.EmailMissed, res.Shipments, res.ShipDups, res.ShipMissed, res.ConsumersKilled, res.Failed, res.ProviderCalls,
			time.Since(start).Round(100*time.Millisecond))
	}
	tw.Flush()
	if !ok {
		fmt.Fprintln(stderr, "checkout: with the pieces, some order was not charged, mailed and shipped exactly once")
		return 1
	}
	fmt.Fprintln(stdout, "\nwith the pieces: every order charged once, mailed once and shipped once.")
	return 0
}

// Incident is the run both modes share: faults at every hop.
func Incident(orders, concurrency int, seed uint64, pool *pgxpool.Pool, rdb *redis.Client, redisAddr, natsURL string) Config {
	return Config{
		Orders: orders, Concurrency: concurrency, Seed: seed,
		DropClient: 0.05, Crash: 0.05, DropProvider: 0.05, DropMail: 0.05, DropShipping: 0.05,
		Flicker: 1500 * time.Millisecond, RelayCrashes: 300 * time.Millisecond, ConsumerKills: 300 * time.Millisecond,
		Pool: pool, Redis: rdb, RedisAddr: redisAddr, NATS: natsURL,
	}
}

// thirdLayer reports whether the run has the third layer, on broker.
func (c Config) thirdLayer() bool { return c.NATS != "" || c.Kafka != "" }

func (c Config) broker() string {
	if c.Kafka != "" {
		return "Kafka"
	}
	return "NATS JetStream"
}

// The services the example uses unless told otherwise: the local ones.
const (
	defaultPostgres = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
	defaultRedis    = "127.0.0.1:6379"
	defaultNATS     = "nats://127.0.0.1:4222"
)

// envOr is the environment variable name, or def when it is unset.
func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

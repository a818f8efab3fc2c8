// Command serverbench measures the idempotency middleware on each store
// against the floor its protocol allows, in one run: per store and
// concurrency, the requests per second and the p50 and p99 latency of
//
//   - handler: the handler alone, no middleware;
//   - floor 2 cmds: the two raw store commands a new key needs (claim and
//     complete), as plainly as the store can say them;
//   - new key: the middleware with a new key (claim, handler, complete);
//   - floor read: the one raw read a replay needs;
//   - store claim: the store's Claim of a key whose response is stored,
//     without the middleware: what the store adds to the raw read, and,
//     against replay, what the middleware adds to the store;
//   - replay: the middleware with a key whose response is stored.
//
// Variants are interleaved (each round runs every one, in a rotated order)
// and the table reports medians over rounds, the ratios of the
// middleware to its floor, and how much the rounds varied: on a shared
// machine that spread is the error bar.
//
//	go run ./cmd/serverbench -stores memory,redis,postgres -conc 1,8,32 -rounds 5
//
// Requests are served in-process (ServeHTTP on a reused request): what is
// measured is the middleware and its store round trips, not an HTTP stack.
// The table also gives the round trips and commands (statements) each
// operation sent its store, counted in the store's client (a go-redis
// hook, a pgx tracer): a new key is two and a replay one on every store,
// and a change that adds one shows there.
//
// Stores: memory, redis (the -redis address), postgres (the -postgres
// DSN), mysql (the -mysql DSN: MySQL or MariaDB; its replay is two round
// trips, a refused INSERT and a read, where PostgreSQL's is one: see
// mysqlstore), dynamodb (the -dynamo endpoint, by default a dynalite of
// serverbench's own, installed from npm as the tests install it; its
// replay is two requests there, a refused PutItem and a read, where real
// DynamoDB returns the item with the refusal), and rediscluster and rediscluster+wait on the Redis Cluster named
// by -redis-cluster; "-redis-cluster own" starts one of serverbench's own
// (6 redis-servers, 3 masters with a replica each, on free ports, stopped
// at the end). rediscluster+wait is the store with
// redisstore.Options{Replicas: 1, ReplicaTimeout: 100ms}: its new keys pay for WAIT.
//
// A fleet: -procs 4 runs each store's variants in 4 processes at once
// (children of serverbench, each with its own middleware and pool, -conc
// per process), and reports their summed req/s and pooled p50/p99: how a
// fleet of middleware instances scales on one store.
//
//	go run ./cmd/serverbench -stores redis,rediscluster,postgres -redis-cluster own -procs 4 -variants "new key,replay"
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/retryhttp/retryhttp/shared/dynamotest"
	"github.com/retryhttp/retryhttp/shared/testenv"
)

func main() { os.Exit(serverbench()) }

// serverbench is main, returning its exit code after its deferred stops
// (the profile, the cluster of serverbench's own).
func serverbench() int {
	stores := flag.String("stores", "memory,redis,postgres", "stores to measure, comma-separated: "+strings.Join(storeNames, ", "))
	concs := flag.String("conc", "1,8,32", "concurrency levels, comma-separated")
	rounds := flag.Int("rounds", 5, "rounds; each runs every variant once")
	duration := flag.Duration("duration", 400*time.Millisecond, "how long each variant runs in a round")
	keys := flag.Int("keys", 1000, "stored keys the replays cycle through")
	redisAddr := flag.String("redis", testenv.RedisAddr(), "Redis address (default: the tests' RETRYHTTP_TEST_REDIS)")
	pgDSN := flag.String("postgres", testenv.PostgresDSN(), "PostgreSQL DSN (default: the tests' RETRYHTTP_TEST_POSTGRES)")
	myDSN := flag.String("mysql", testenv.MySQLDSN(), "MySQL or MariaDB DSN, go-sql-driver's form (default: the tests' RETRYHTTP_TEST_MYSQL)")
	dynamo := flag.String("dynamo", "own", `the DynamoDB endpoint for the dynamodb store, or "own" for a dynalite serverbench starts`)
	cluster := flag.String("redis-cluster", "", `the Redis Cluster's seed addresses, comma-separated, or "own" for one serverbench starts`)
	procs := flag.Int("procs", 1, "middleware processes measured at once on each store")
	conns := flag.Int("conns", 0, "each process's store connections (default: 64, or twice the highest -conc; in a fleet at most 80 over all processes, under PostgreSQL's default max_connections)")
	isChild := flag.Bool("child", false, "run as one process of a fleet (serverbench starts these itself)")
	variants := flag.String("variants", strings.Join(variantNames[:], ","), "variants to run, comma-separated")
	cpuprofile := flag.String("cpuprofile", "", "write this process's CPU profile to a file")
	flag.Parse()

	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "serverbench:", err)
			return 1
		}
		defer pprof.StopCPUProfile()
	}

	levels, err := parseInts(*concs)
	if err != nil || *rounds < 1 || *duration <= 0 || *keys < 1 || *procs < 1 || *conns < 0 {
		fmt.Fprintln(os.Stderr, "serverbench: -conc takes positive integers; -rounds, -duration, -keys and -procs must be positive")
		return 2
	}
	if *conns == 0 {
		*conns = max(64, 2*slices.Max(levels))
		if *procs > 1 {
			*conns = max(4, min(*conns, 80 / *procs))
		}
	}
	ctx := context.Background()
	at := where{redis: *redisAddr, cluster: *cluster, postgres: *pgDSN, mysql: *myDSN, dynamo: *dynamo, child: *isChild}
	if *isChild {
		if err := child(ctx, *stores, at, *keys, *conns); err != nil {
			fmt.Fprintln(os.Stderr, "serverbench -child:", err)
			return 1
		}
		return 0
	}
	if at.cluster == "own" {
		c, err := startCluster(ctx)
		if err != nil {
			fmt.Fprintln(os.Stderr, "serverbench:", err)
			return 1
		}
		at.cluster = strings.Join(c.addrs, ",")
		fmt.Printf("Redis Cluster of serverbench's own: %s\n", at.cluster)
		defer c.stop()
	}
	if at.dynamo == "own" && slices.Contains(strings.Split(*stores, ","), "dynamodb") {
		dir, err := os.MkdirTemp("", "serverbench-dynalite")
		if err != nil {
			fmt.Fprintln(os.Stderr, "serverbench:", err)
			return 1
		}
		defer os.RemoveAll(dir)
		d, err := dynamotest.Launch(dir)
		if err != nil {
			fmt.Fprintln(os.Stderr, "serverbench:", err)
			return 1
		}
		defer d.Kill()
		at.dynamo = d.URL
		fmt.Printf("dynalite of serverbench's own: %s\n", at.dynamo)
	}
	cfg := config{levels: levels, rounds: *rounds, duration: *duration, keys: *keys}
	for _, v := range strings.Split(*variants, ",") {
		i := slices.Index(variantNames[:], strings.TrimSpace(v))
		if i < 0 {
			fmt.Fprintf(os.Stderr, "serverbench: unknown variant %q (%s)\n", v, strings.Join(variantNames[:], ", "))
			return 2
		}
		cfg.run[i] = true
	}
	fmt.Printf("machine: %d cores; %d rounds of %v per variant; medians over rounds\n\n", runtime.NumCPU(), cfg.rounds, cfg.duration)
	if err := measureAll(ctx, strings.Split(*stores, ","), at, cfg, *procs, *conns); err != nil {
		fmt.Fprintln(os.Stderr, "serverbench:", err)
		return 1
	}
	return 0
}

func measureAll(ctx context.Context, stores []string, at where, cfg config, procs, conns int) error {
	for _, name := range stores {
		name = strings.TrimSpace(name)
		var rep *report
		if procs > 1 {
			var err error
			if rep, err = runFleet(ctx, name, at, cfg, procs, conns); err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
		} else {
			b, err := newBackend(ctx, name, at, conns)
			if err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			rep, err = run(ctx, b, cfg)
			b.close()
			if err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
		}
		rep.print(os.Stdout)
	}
	return nil
}

func parseInts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("bad level %q", f)
		}
		out = append(out, n)
	}
	return out, nil
}

// Command serverbench measures the idempotency middleware on each store
// against the floor its protocol allows, in one run: per store and
// concurrency, the requests per second and the p50 and p99 latency of
//
//   - handler: the handler alone, no middleware;
//   - floor 2 cmds: the two raw store commands a new key needs (claim and
//     complete), as plainly as the store can say them;
//   - new key: the middleware with a new key (claim, handler, complete);
//   - floor read: the one raw read a replay needs;
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

	"github.com/retryhttp/retryhttp/internal/testenv"
)

func main() {
	stores := flag.String("stores", "memory,redis,postgres", "stores to measure, comma-separated: memory, redis, postgres")
	concs := flag.String("conc", "1,8,32", "concurrency levels, comma-separated")
	rounds := flag.Int("rounds", 5, "rounds; each runs every variant once")
	duration := flag.Duration("duration", 400*time.Millisecond, "how long each variant runs in a round")
	keys := flag.Int("keys", 1000, "stored keys the replays cycle through")
	redisAddr := flag.String("redis", testenv.RedisAddr(), "Redis address (default: the tests' RETRYHTTP_TEST_REDIS)")
	pgDSN := flag.String("postgres", testenv.PostgresDSN(), "PostgreSQL DSN (default: the tests' RETRYHTTP_TEST_POSTGRES)")
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
			os.Exit(1)
		}
		defer pprof.StopCPUProfile()
	}

	levels, err := parseInts(*concs)
	if err != nil || *rounds < 1 || *duration <= 0 || *keys < 1 {
		fmt.Fprintln(os.Stderr, "serverbench: -conc takes positive integers; -rounds, -duration and -keys must be positive")
		os.Exit(2)
	}
	ctx := context.Background()
	cfg := config{levels: levels, rounds: *rounds, duration: *duration, keys: *keys}
	for _, v := range strings.Split(*variants, ",") {
		i := slices.Index(variantNames[:], strings.TrimSpace(v))
		if i < 0 {
			fmt.Fprintf(os.Stderr, "serverbench: unknown variant %q (%s)\n", v, strings.Join(variantNames[:], ", "))
			os.Exit(2)
		}
		cfg.run[i] = true
	}
	fmt.Printf("machine: %d cores; %d rounds of %v per variant; medians over rounds\n\n", runtime.NumCPU(), cfg.rounds, cfg.duration)
	for _, name := range strings.Split(*stores, ",") {
		b, err := newBackend(ctx, strings.TrimSpace(name), *redisAddr, *pgDSN, max(64, 2*slices.Max(levels)))
		if err != nil {
			fmt.Fprintf(os.Stderr, "serverbench: %s: %v\n", name, err)
			os.Exit(1)
		}
		rep, err := run(ctx, b, cfg)
		b.close()
		if err != nil {
			fmt.Fprintf(os.Stderr, "serverbench: %s: %v\n", name, err)
			pprof.StopCPUProfile()
			os.Exit(1)
		}
		rep.print(os.Stdout)
	}
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

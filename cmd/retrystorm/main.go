// Command retrystorm shows a retry storm against a recovering server, and
// how backoff, jitter and a retry budget tame it: with numbers, a chart and
// a sparkline per strategy.
//
//	go run ./cmd/retrystorm                 # live: 500 clients, a 2 s outage, real HTTP on loopback
//	go run ./cmd/retrystorm -sim -clients 10000 -outage 60s
//	go run ./cmd/retrystorm -sim -scenario contention
//	go run ./cmd/retrystorm -sim -scenario overload
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// errReported is a flag error the flag package has already printed.
var errReported = errors.New("bad flags")

// config is what the flags say.
type config struct {
	sim        bool
	scenario   string
	clients    int
	outage     time.Duration
	capacity   int
	seed       uint64
	out        string
	strategies string
}

func parseFlags(args []string, stderr io.Writer) (config, error) {
	var c config
	fs := flag.NewFlagSet("retrystorm", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.BoolVar(&c.sim, "sim", false, "simulate in virtual time instead of running live on loopback (deterministic for a -seed; fast enough for 10,000 clients and 60 s outages)")
	fs.StringVar(&c.scenario, "scenario", "outage", "outage: clients retry at once into a recovering server;\ncontention: optimistic-concurrency writes to one row (the AWS backoff study);\noverload: open-loop load at 90% of capacity and a short outage (metastable failure)")
	fs.IntVar(&c.clients, "clients", 500, "clients (outage and contention scenarios)")
	fs.DurationVar(&c.outage, "outage", 2*time.Second, "how long the server is down (outage and overload scenarios)")
	fs.IntVar(&c.capacity, "capacity", 1000, "requests per second the server can serve")
	fs.Uint64Var(&c.seed, "seed", 1, "random seed of the simulation")
	fs.StringVar(&c.out, "out", "", "directory for the chart (SVG and PNG); default a new temporary directory")
	fs.StringVar(&c.strategies, "strategies", "", "comma-separated subset of strategies to run (default all):\n"+strings.Join(strategyNames(), ", "))
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: retrystorm [flags]\n\nShows a retry storm against a recovering server and how backoff, jitter and budgets tame it.\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return c, err
		}
		return c, errReported // the flag package has printed it, with the usage
	}
	switch {
	case fs.NArg() > 0:
		return c, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	case c.scenario != "outage" && c.scenario != "contention" && c.scenario != "overload":
		return c, fmt.Errorf("unknown -scenario %q: want outage, contention or overload", c.scenario)
	case c.clients <= 0:
		return c, fmt.Errorf("-clients must be positive, not %d", c.clients)
	case c.clients > 100_000:
		return c, fmt.Errorf("-clients %d is more than 100,000", c.clients)
	case !c.sim && c.clients > 5000:
		return c, fmt.Errorf("-clients %d is too many for a live run on one machine: use -sim", c.clients)
	case c.outage < 0:
		return c, fmt.Errorf("-outage must not be negative, not %v", c.outage)
	case !c.sim && c.outage > 30*time.Second:
		return c, fmt.Errorf("-outage %v is too long for a live run: use -sim", c.outage)
	case c.capacity <= 0:
		return c, fmt.Errorf("-capacity must be positive, not %d", c.capacity)
	}
	if _, err := pickStrategies(scenarioOf(c), c.strategies); err != nil {
		return c, err
	}
	return c, nil
}

func scenarioOf(c config) scenario {
	switch c.scenario {
	case "contention":
		return contentionScenario(c.clients)
	case "overload":
		return overloadScenario(c.capacity, c.outage)
	}
	return outageScenario(c.clients, c.outage, c.capacity)
}

func strategyNames() []string {
	var names []string
	for _, s := range outageScenario(1, 0, 1).strategies() {
		names = append(names, s.name)
	}
	return names
}

func pickStrategies(sc scenario, list string) ([]strategy, error) {
	all := sc.strategies()
	if list == "" {
		return all, nil
	}
	var out []strategy
	for _, name := range strings.Split(list, ",") {
		name = strings.TrimSpace(name)
		found := false
		for _, s := range all {
			if s.name == name {
				out = append(out, s)
				found = true
			}
		}
		if !found {
			return nil, fmt.Errorf("unknown strategy %q: want one of %s", name, strings.Join(strategyNames(), ", "))
		}
	}
	return out, nil
}

func run(args []string, stdout, stderr io.Writer) int {
	c, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if errors.Is(err, errReported) {
		return 2
	}
	if err != nil {
		fmt.Fprintf(stderr, "retrystorm: %v\n", err)
		return 2
	}
	sc := scenarioOf(c)
	strategies, _ := pickStrategies(sc, c.strategies)
	mode := "live"
	if c.sim {
		mode = "sim"
	}
	fmt.Fprintf(stdout, "retrystorm (%s) %v\n\n", mode, sc)

	began := time.Now()
	var results []result
	for i, st := range strategies {
		var r result
		if c.sim {
			r = simulate(sc, st, c.seed)
		} else {
			progress := func(d time.Duration) {
				fmt.Fprintf(stderr, "\r[%d/%d] %-20s %5.1fs", i+1, len(strategies), st.name, d.Seconds())
			}
			progress(0)
			if r, err = runLive(sc, st, progress); err != nil {
				fmt.Fprintf(stderr, "\nretrystorm: %v\n", err)
				return 1
			}
		}
		results = append(results, r)
	}
	if !c.sim {
		fmt.Fprintf(stderr, "\r%-40s\r", "")
	}
	printTable(stdout, results)
	fmt.Fprintln(stdout)
	printSparklines(stdout, results)

	dir := c.out
	if dir == "" {
		if dir, err = os.MkdirTemp("", "retrystorm-"); err != nil {
			fmt.Fprintf(stderr, "retrystorm: %v\n", err)
			return 1
		}
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		fmt.Fprintf(stderr, "retrystorm: %v\n", err)
		return 1
	}
	paths, err := writeChart(dir, sc, results, mode)
	if err != nil {
		fmt.Fprintf(stderr, "retrystorm: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "\nchart: %s\n       %s\n", paths[0], paths[1])
	fmt.Fprintf(stdout, "finished in %v\n", time.Since(began).Round(100*time.Millisecond))
	return 0
}

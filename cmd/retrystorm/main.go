// Command retrystorm shows a retry storm against a recovering server, and
// how backoff, jitter and a retry budget tame it: with numbers, a chart and
// a sparkline per strategy. -reproduce checks the library against the
// published retry results.
//
//	go run ./cmd/retrystorm                 # live: 500 clients, a 2 s outage, real HTTP on loopback
//	go run ./cmd/retrystorm -sim -clients 10000 -outage 60s
//	go run ./cmd/retrystorm -sim -scenario contention
//	go run ./cmd/retrystorm -sim -scenario overload -server queue -slow 0.5 -attempt-timeout 1s
//	go run ./cmd/retrystorm -reproduce      # the published results, side by side with ours
//	go run ./cmd/retrystorm -hedge          # the hedging fan-out, live on loopback
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
	sim, reproduce bool
	hedge          bool
	scenario       string
	seed           uint64
	out            string
	strategies     string
	sc             scenario // the scenario, with the flags that were set applied
}

// scenarioFlags are the flags that change a scenario; each overrides the
// scenario's own value only when it is given.
type scenarioFlags struct {
	clients                             int
	outage, outageAt, duration, runFor  time.Duration
	capacity                            int
	rate, load, slow, rejectCost        float64
	server                              string
	attempts                            int
	attemptTimeout, deadline, base, cap time.Duration
	delay, spread                       time.Duration
	budgetRatio, budgetFloor            float64
}

func parseFlags(args []string, stderr io.Writer) (config, error) {
	var c config
	var f scenarioFlags
	fs := flag.NewFlagSet("retrystorm", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.BoolVar(&c.sim, "sim", false, "simulate in virtual time instead of running live on loopback (deterministic for a -seed; fast enough for 10,000 clients and 60 s outages)")
	fs.BoolVar(&c.reproduce, "reproduce", false, "reproduce the published retry results (AWS backoff study, Brooker 2022, Google SRE book, HotOS 2021) in virtual time and print them side by side with ours; exits 1 if a row is outside its tolerance")
	fs.StringVar(&c.scenario, "scenario", "outage", "outage: clients retry at once into a recovering server;\ncontention: optimistic-concurrency writes to one row (the AWS backoff study's model; -sim only);\noverload: open-loop load near capacity and a trigger (metastable failure);\nrejecting: sustained demand at 3x capacity, rejections costing 30% of a served request (client-side throttling)")
	fs.IntVar(&f.clients, "clients", 0, "clients that start together (outage: 500, contention: 100)")
	fs.DurationVar(&f.outage, "outage", 0, "how long the trigger lasts: the server down, or slowed with -slow (outage: 2s)")
	fs.DurationVar(&f.outageAt, "outage-at", 0, "when the trigger starts (overload: 3s)")
	fs.Float64Var(&f.slow, "slow", 0, "during the trigger the server works at this share of its capacity; 0: down")
	fs.IntVar(&f.capacity, "capacity", 0, "requests per second the server can serve (1000)")
	fs.Float64Var(&f.rate, "rate", 0, "open loop: logical requests per second (overload: 90% of capacity)")
	fs.Float64Var(&f.load, "load", 0, "open loop: the rate as a share of capacity, instead of -rate")
	fs.DurationVar(&f.duration, "duration", 0, "open loop: how long requests keep arriving (overload: until 6 s after the trigger)")
	fs.DurationVar(&f.runFor, "run-for", 0, "stop watching after this much time (default: when every request has ended)")
	fs.StringVar(&f.server, "server", "", "server model: reject (sheds past capacity, the default) or queue (FIFO at capacity, works through requests nobody waits for; -sim only)")
	fs.Float64Var(&f.rejectCost, "reject-cost", -1, "reject model: a rejection's cost as a share of a served request's (outage 0.1, overload 0.3)")
	fs.IntVar(&f.attempts, "attempts", -1, "Policy.MaxAttempts; 0: unlimited (outage 10, overload 6)")
	fs.DurationVar(&f.attemptTimeout, "attempt-timeout", 0, "a client gives up on an attempt after this (default: never)")
	fs.DurationVar(&f.deadline, "deadline", 0, "each logical request's deadline")
	fs.DurationVar(&f.base, "base", 0, "Policy.BaseDelay")
	fs.DurationVar(&f.cap, "cap", 0, "Policy.MaxDelay")
	fs.DurationVar(&f.delay, "delay", 0, "one-way network delay")
	fs.DurationVar(&f.spread, "delay-spread", 0, "standard deviation of the network delay (|Normal(delay, spread)|)")
	fs.Float64Var(&f.budgetRatio, "budget-ratio", 0, "the budget strategy's Ratio (0.1)")
	fs.Float64Var(&f.budgetFloor, "budget-floor", 0, "the budget strategy's MinPerSecond (10)")
	fs.Uint64Var(&c.seed, "seed", 1, "random seed of the simulation")
	fs.BoolVar(&c.hedge, "hedge", false, "run the hedging fan-out live: 200 reads of 100 keys over 20 loopback servers with stragglers, without hedging, with a hedge after 10 ms, and after the learnt p95")
	fs.StringVar(&c.out, "out", "", "directory for the charts (SVG and PNG); default a new temporary directory")
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
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	set := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	switch c.scenario {
	case "outage":
		c.sc = outageScenario(500, 2*time.Second, 1000)
	case "contention":
		c.sc = contentionScenario(100)
	case "overload":
		c.sc = overloadScenario(1000, 2*time.Second)
	case "rejecting":
		c.sc = rejectingScenario(1000)
	default:
		return c, fmt.Errorf("unknown -scenario %q: want outage, contention, overload or rejecting", c.scenario)
	}
	if err := f.apply(&c.sc, set, c.sim); err != nil {
		return c, err
	}
	if _, err := pickStrategies(c.sc, c.strategies); err != nil {
		return c, err
	}
	return c, nil
}

// apply sets the flags that were given on sc, after checking them.
func (f scenarioFlags) apply(sc *scenario, set map[string]bool, sim bool) error {
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"outage", f.outage}, {"outage-at", f.outageAt}, {"duration", f.duration}, {"run-for", f.runFor},
		{"attempt-timeout", f.attemptTimeout}, {"deadline", f.deadline}, {"base", f.base}, {"cap", f.cap},
		{"delay", f.delay}, {"delay-spread", f.spread}} {
		if d.v < 0 {
			return fmt.Errorf("-%s must not be negative, not %v", d.name, d.v)
		}
	}
	switch {
	case set["clients"] && f.clients <= 0:
		return fmt.Errorf("-clients must be positive, not %d", f.clients)
	case f.clients > 100_000:
		return fmt.Errorf("-clients %d is more than 100,000", f.clients)
	case set["capacity"] && f.capacity <= 0:
		return fmt.Errorf("-capacity must be positive, not %d", f.capacity)
	case f.rate < 0 || f.load < 0:
		return fmt.Errorf("-rate and -load must not be negative")
	case set["rate"] && set["load"]:
		return fmt.Errorf("give -rate or -load, not both")
	case f.slow < 0 || f.slow > 1:
		return fmt.Errorf("-slow must be between 0 and 1, not %v", f.slow)
	case set["reject-cost"] && (f.rejectCost < 0 || f.rejectCost >= 1):
		return fmt.Errorf("-reject-cost must be in [0, 1), not %v", f.rejectCost)
	case set["attempts"] && f.attempts < 0:
		return fmt.Errorf("-attempts must not be negative, not %d", f.attempts)
	case set["server"] && f.server != "reject" && f.server != "queue":
		return fmt.Errorf("unknown -server %q: want reject or queue", f.server)
	case f.budgetRatio < 0 || f.budgetFloor < 0:
		return fmt.Errorf("-budget-ratio and -budget-floor must not be negative")
	}
	if set["clients"] {
		sc.clients = f.clients
	}
	if set["outage"] {
		sc.outage = f.outage
	}
	if set["outage-at"] {
		sc.outageAt = f.outageAt
	}
	if set["slow"] {
		sc.slow = f.slow
	}
	if set["capacity"] {
		sc.capacity = f.capacity
		if sc.name == "overload" && !set["rate"] && !set["load"] {
			sc.rate = 0.9 * float64(sc.capacity)
		}
	}
	if set["rate"] {
		sc.rate = f.rate
	}
	if set["load"] {
		sc.rate = f.load * float64(sc.capacity)
	}
	if set["duration"] {
		sc.duration = f.duration
	} else if sc.name == "overload" && set["outage"] {
		sc.duration = sc.recovery() + 6*time.Second
	}
	if set["run-for"] {
		sc.runFor = f.runFor
	}
	if set["server"] {
		sc.queue = f.server == "queue"
	}
	if set["reject-cost"] {
		sc.rejectCost = f.rejectCost
	}
	if set["attempts"] {
		sc.attempts = f.attempts
	}
	if set["attempt-timeout"] {
		sc.attemptTimeout = f.attemptTimeout
	}
	if set["deadline"] {
		sc.deadline = f.deadline
	} else if sc.name == "outage" && set["outage"] {
		sc.deadline = sc.outage + 2*time.Second
	}
	if set["base"] {
		sc.base = f.base
	}
	if set["cap"] {
		sc.cap = f.cap
	}
	if set["delay"] {
		sc.delay = f.delay
	}
	if set["delay-spread"] {
		sc.spread = f.spread
	}
	if set["budget-ratio"] {
		sc.budget.ratio = f.budgetRatio
	}
	if set["budget-floor"] {
		sc.budget.floor = f.budgetFloor
	}
	if sc.rate > 0 && sc.duration == 0 {
		return fmt.Errorf("an open-loop run needs -duration")
	}
	if sc.attempts == 0 && sc.deadline == 0 && sc.runFor == 0 {
		return fmt.Errorf("unlimited -attempts need a -deadline or a -run-for")
	}
	if !sim {
		switch {
		case sc.name == "contention":
			return fmt.Errorf("-scenario contention runs in -sim only (its model is the AWS study's simulator)")
		case sc.queue:
			return fmt.Errorf("-server queue runs in -sim only")
		case sc.clients > 5000:
			return fmt.Errorf("-clients %d is too many for a live run on one machine: use -sim", sc.clients)
		case sc.outage > 30*time.Second:
			return fmt.Errorf("-outage %v is too long for a live run: use -sim", sc.outage)
		case sc.attemptTimeout > 0, sc.slow > 0, sc.spread > 0:
			return fmt.Errorf("-attempt-timeout, -slow and -delay-spread run in -sim only")
		}
	}
	return nil
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
	dir, err := outDir(c.out)
	if err != nil {
		fmt.Fprintf(stderr, "retrystorm: %v\n", err)
		return 1
	}
	if c.reproduce {
		return reproduce(stdout, stderr, []uint64{c.seed}, dir)
	}
	if c.hedge {
		if err := hedgeLive(stdout, 20, 200, 100, c.seed); err != nil {
			fmt.Fprintf(stderr, "retrystorm: %v\n", err)
			return 1
		}
		return 0
	}
	sc := c.sc
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

	paths, err := writeChart(dir, sc, results, mode)
	if err != nil {
		fmt.Fprintf(stderr, "retrystorm: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "\nchart: %s\n       %s\n", paths[0], paths[1])
	fmt.Fprintf(stdout, "finished in %v\n", time.Since(began).Round(100*time.Millisecond))
	return 0
}

// outDir returns dir, created, or a new temporary directory.
func outDir(dir string) (string, error) {
	if dir == "" {
		return os.MkdirTemp("", "retrystorm-")
	}
	return dir, os.MkdirAll(dir, 0o755)
}

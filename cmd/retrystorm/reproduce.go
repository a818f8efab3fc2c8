package main

import (
	"fmt"
	"io"
	"math"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/retryhttp/retryhttp"
	"github.com/retryhttp/retryhttp/internal/circuit"
	"github.com/retryhttp/retryhttp/internal/defaults"
)

// row is one published figure side by side with ours.
type row struct {
	source, figure string
	published      float64
	said           string // the figure as its source states it, when not a plain number
	ours           float64
	unit           string
	tol            tolerance
}

// tolerance is how far ours may be from the published figure: a relative
// margin, or bounds stated by the source ("just below 3x").
type tolerance struct {
	rel    float64
	lo, hi float64 // used when rel is 0
}

func (t tolerance) String() string {
	if t.rel > 0 {
		return fmt.Sprintf("±%.0f%%", 100*t.rel)
	}
	return fmt.Sprintf("[%.3g, %.3g]", t.lo, t.hi)
}

func (r row) within() bool {
	if r.tol.rel > 0 {
		return math.Abs(r.ours-r.published) <= r.tol.rel*math.Abs(r.published)
	}
	return r.ours >= r.tol.lo && r.ours <= r.tol.hi
}

// Sources, as the table names them.
const (
	srcAWS     = "AWS 2015"
	srcBrooker = "Brooker 2022"
	srcSRE21   = "SRE book ch. 21"
	srcSRE22   = "SRE book ch. 22"
	srcHotOS   = "HotOS 2021"
	srcTail    = "Tail at Scale 2013"
	srcOurs    = "no source"
)

// awsStrategies are the study's five, as retryhttp policies: JitterNone is
// its plain exponential backoff, and "no backoff" waits nothing.
var awsStrategies = []struct {
	name, study string
	policy      retryhttp.Policy
}{
	{"no backoff", "None", retryhttp.Policy{BaseDelay: time.Nanosecond, MaxDelay: time.Nanosecond, Jitter: retryhttp.JitterNone}},
	{"exponential", "Exponential", awsPolicy(retryhttp.JitterNone)},
	{"full jitter", "FullJitter", awsPolicy(retryhttp.JitterFull)},
	{"equal jitter", "EqualJitter", awsPolicy(retryhttp.JitterEqual)},
	{"decorrelated", "Decorr", awsPolicy(retryhttp.JitterDecorrelated)},
}

func awsPolicy(j retryhttp.Jitter) retryhttp.Policy {
	return retryhttp.Policy{BaseDelay: 5 * time.Millisecond, MaxDelay: 2 * time.Second, Jitter: j}
}

// awsPublished are the study's simulator's figures, rerun as published
// (500 runs each; spread under ±1% on calls, ±2% on time): calls at N = 50,
// 100, 200, and completion time at N = 100, per strategy in awsStrategies'
// order.
var awsPublished = map[string][5]float64{
	"calls/50":  {690, 622, 333, 347, 375},
	"calls/100": {2420, 1848, 796, 812, 1002},
	"calls/200": {8811, 5617, 1891, 1871, 2606},
	"time/100":  {2.03, 63.1, 4.86, 6.61, 4.59},
}

// awsRuns is how many races each of our figures averages. The study's
// rerun figures average 500 (their spread: under ±1% on calls, ±2% on
// time); ours 200 (ours, over five seeds: under ±0.5% on calls, ±1.4% on
// time). The tolerances add the two: ±2% on calls, ±3% on time.
const awsRuns = 200

// awsContention averages calls and completion time over runs, spread over
// the machine's cores; run i has its own seed, so the mean does not depend
// on how the runs were spread.
func awsContention(n int, policy retryhttp.Policy, seed uint64) (calls, seconds float64) {
	sc := contentionScenario(n)
	policy.MaxAttempts = 1 << 30
	st := strategy{policy: policy}
	results := make([]result, awsRuns)
	var wg sync.WaitGroup
	next := atomic.Int64{}
	for range runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			for i := next.Add(1) - 1; i < awsRuns; i = next.Add(1) - 1 {
				results[i] = simulateOCC(sc, st, seed*1_000_003+uint64(i))
			}
		})
	}
	wg.Wait()
	for _, r := range results {
		calls += float64(r.calls)
		seconds += r.finished.Seconds()
	}
	return calls / awsRuns, seconds / awsRuns
}

// brooker is the post's setup: 100 clients, 1,000 calls/s in all, hops of
// 10 ms on average, 3 retries.
func brooker(p float64, limit ampLimit, seed uint64) float64 {
	return amplification(ampConfig{
		clients: 100, rate: 1000, p: p, attempts: 4, hop: 10 * time.Millisecond, runFor: 300 * time.Second,
		limit: limit,
		// His bucket holds 5 tokens and fills by 0.1 a call: ours keeps 10%
		// of the calls of the last 10 s and a reserve of 5 (0.5/s × 10 s).
		budget: budgetConfig{ratio: 0.1, floor: 0.5, window: 10 * time.Second},
		// His breaker stops retries when a client's recent failure rate is
		// high; ours opens on consecutive failures. Two in a row at a 10%
		// failure rate is the nearest trip point; it stays open for our
		// default OpenFor, and breaks retries only, as his does.
		breaker: circuit.Settings{Failures: 2, Probes: 1, OpenFor: defaults.BreakerOpenFor},
	}, seed)
}

// sreGrowth is chapter 22's example: a server of capacity 10,000/s gets
// 10,100/s; what it rejects is retried one second later, without limit.
// It returns the growth of the retries per second, per second, fitted
// over the first 30 s.
func sreGrowth(seed uint64) (slope float64, perSecond []float64) {
	sc := scenario{name: "sre22", rate: 10_100, duration: 30 * time.Second, runFor: 30 * time.Second, uniform: true,
		capacity: 10_000, deadline: time.Hour, outageAt: time.Hour}
	st := strategy{policy: retryhttp.Policy{MaxAttempts: 1 << 30, BaseDelay: time.Second, MaxDelay: time.Second, Jitter: retryhttp.JitterNone, MaxElapsed: time.Hour}}
	r := simulate(sc, st, seed)
	bins := int(time.Second / binWidth)
	for s := 0; (s+1)*bins <= len(r.load) && s < 30; s++ {
		n := 0
		for _, v := range r.load[s*bins : (s+1)*bins] {
			n += v
		}
		perSecond = append(perSecond, float64(n)-10_100)
	}
	// Least squares over seconds 2 to 29: the first second has no retries.
	var sx, sy, sxx, sxy, k float64
	for s := 2; s < len(perSecond); s++ {
		x, y := float64(s), perSecond[s]
		sx, sy, sxx, sxy, k = sx+x, sy+y, sxx+x*x, sxy+x*y, k+1
	}
	return (k*sxy - sx*sy) / (k*sxx - sx*sx), perSecond
}

// hotosScenario is the metastable failure of Bronson et al.: an app at 280
// queries/s against a database that serves 300/s in order, each query
// retried once when it times out after 1 s. A trigger halves the
// database's capacity for 5 s.
func hotosScenario() scenario {
	return scenario{
		name: "hotos", rate: 280, duration: 400 * time.Second, runFor: 400 * time.Second,
		outageAt: 10 * time.Second, outage: 5 * time.Second, slow: 0.5,
		capacity: 300, queue: true, delay: time.Millisecond, attemptTimeout: time.Second, deadline: 10 * time.Second,
		attempts: 2, base: time.Nanosecond, cap: time.Nanosecond,
		// A budget inside the 7% of headroom: 280 × 1.05 + 0.1 < 300.
		budget: budgetConfig{ratio: 0.05, floor: 0.1, window: 10 * time.Second},
	}
}

// hotos returns the load (arrivals per first try) over the last 100 s of
// the run, with and without the budget, and with the database behind a
// Shedder and no budget; the share of queries answered over those 100 s
// in the last case; and the results for the chart.
func hotos(seed uint64) (without, with, shed, shedServed float64, rs []result) {
	sc := hotosScenario()
	once := retryhttp.Policy{MaxAttempts: 2, BaseDelay: time.Nanosecond, MaxDelay: time.Nanosecond, Jitter: retryhttp.JitterNone, MaxElapsed: time.Hour}
	for _, st := range []strategy{
		{name: "one retry per timeout", policy: once},
		{name: "one retry per timeout, 5% budget", policy: once, budget: true},
		{name: "one retry per timeout, the database shedding", policy: once, shed: true},
	} {
		r := simulate(sc, st, seed)
		rs = append(rs, r)
		load := r.loadBetween(300*time.Second, 400*time.Second) / sc.rate
		switch {
		case st.budget:
			with = load
		case st.shed:
			shed = load
			shedServed = r.servedBetween(300*time.Second, 400*time.Second)
		default:
			without = load
		}
	}
	return without, with, shed, shedServed, rs
}

// reproduction is the whole table, with what the charts need.
type reproduction struct {
	rows      []row
	awsCalls  map[string][3]float64 // ours, by strategy, at N = 50, 100, 200
	brookerP  []float64
	brookerAt map[string][]float64 // ours, by limit, at brookerP
	growth    []float64            // SRE ch. 22: retries per second, by second
	hotos     []result
	throttle  []float64       // SRE ch. 21: sent per accepted, per 30 s
	tailPlain []time.Duration // The Tail at Scale: reads' latencies, sorted, without hedging
	tailHedge []time.Duration // and with
}

func reproduceRows(seed uint64) reproduction {
	rep := reproduction{awsCalls: map[string][3]float64{}, brookerAt: map[string][]float64{}}
	for i, s := range awsStrategies {
		var calls [3]float64
		for j, n := range []int{50, 100, 200} {
			c, secs := awsContention(n, s.policy, seed)
			calls[j] = c
			key := fmt.Sprintf("calls/%d", n)
			rep.rows = append(rep.rows, row{source: srcAWS, figure: fmt.Sprintf("contention N=%d, %s: calls", n, s.name),
				published: awsPublished[key][i], ours: c, tol: tolerance{rel: 0.02}})
			if n == 100 {
				rep.rows = append(rep.rows, row{source: srcAWS, figure: fmt.Sprintf("contention N=100, %s: time", s.name),
					published: awsPublished["time/100"][i], ours: secs, unit: "s", tol: tolerance{rel: 0.03}})
			}
		}
		rep.awsCalls[s.name] = calls
	}
	rep.brookerP = []float64{0.1, 0.5, 1.0}
	published := map[ampLimit][]float64{limitNone: {1.114, 1.88, 4.00}, limitBudget: {1.103, 1.14, 1.142}, limitBreaker: {1.029, 1.00, 1.00}}
	names := map[ampLimit]string{limitNone: "3 retries", limitBudget: "3 retries, budget for his token bucket", limitBreaker: "3 retries, breaker on retries"}
	for _, limit := range []ampLimit{limitNone, limitBudget, limitBreaker} {
		for i, p := range rep.brookerP {
			v := brooker(p, limit, seed)
			rep.brookerAt[names[limit]] = append(rep.brookerAt[names[limit]], v)
			rep.rows = append(rep.rows, row{source: srcBrooker, figure: fmt.Sprintf("%s, p=%.1f: load", names[limit], p),
				published: published[limit][i], ours: v, unit: "x", tol: tolerance{rel: 0.02}})
		}
	}
	sre := func(attempts int, limit ampLimit, b budgetConfig) float64 {
		return amplification(ampConfig{clients: 100, rate: 1000, p: 1, attempts: attempts, hop: 10 * time.Millisecond,
			runFor: 300 * time.Second, limit: limit, budget: b}, seed)
	}
	rep.rows = append(rep.rows,
		row{source: srcSRE21, figure: "3 attempts, 100% rejected: load", published: 3, said: "just below 3x",
			ours: sre(3, limitNone, budgetConfig{}), unit: "x", tol: tolerance{lo: 2.7, hi: 3}},
		row{source: srcSRE21, figure: "with a 10% per-client budget: load", published: 1.1, said: "just 1.1x",
			ours: sre(3, limitBudget, budgetConfig{ratio: 0.1, window: 10 * time.Second}), unit: "x", tol: tolerance{rel: 0.02}})
	ratio, over30s := sreThrottle(seed)
	rep.throttle = over30s
	rep.rows = append(rep.rows, row{source: srcSRE21, figure: "1,000/s offered to a backend taking 100/s, throttled (K = 2): sent per accepted",
		published: 2, said: "requests ≈ K × accepts", ours: ratio, unit: "x", tol: tolerance{rel: 0.05}})
	plain, hedged, extra := tailReads(seed)
	rep.tailPlain, rep.tailHedge = plain, hedged
	without, with := quantile(plain, 0.999), quantile(hedged, 0.999)
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	rep.rows = append(rep.rows,
		row{source: srcTail, figure: "1,000 keys over 100 servers: p99.9 of a read, no hedging", published: 1800,
			ours: ms(without), unit: "ms", tol: tolerance{lo: 900, hi: 3600}},
		row{source: srcTail, figure: "the same, hedged after 10 ms: p99.9", published: 74,
			ours: ms(with), unit: "ms", tol: tolerance{lo: 0, hi: ms(without) / 10}},
		row{source: srcTail, figure: "the requests the hedges add", published: 2, said: "2%",
			ours: 100 * extra, unit: "%", tol: tolerance{lo: 0, hi: 5}})
	slope, growth := sreGrowth(seed)
	rep.growth = growth
	rep.rows = append(rep.rows, row{source: srcSRE22, figure: "10,100/s into 10,000/s, retried after 1 s: retries' growth",
		published: 100, said: "~100/s every second", ours: slope, unit: "/s²", tol: tolerance{rel: 0.02}})
	loadWithout, loadWith, loadShed, served, rs := hotos(seed)
	rep.hotos = rs
	rep.rows = append(rep.rows,
		row{source: srcHotOS, figure: "280/s into 300/s, 1 retry per timeout, after a 5 s slowdown: load", published: 2, said: "~2x, sustained",
			ours: loadWithout, unit: "x", tol: tolerance{rel: 0.05}},
		row{source: srcHotOS, figure: "the same with a retry budget inside the headroom: load", published: 1, said: "back to normal",
			ours: loadWith, unit: "x", tol: tolerance{rel: 0.05}},
		// The paper names load shedding among the ways out and gives no
		// figure for it: these rows hold it to "back to normal" (the
		// queries shed do not reach the database, so at most 1x), and to
		// what a limit near the database's one query in service admits.
		row{source: srcHotOS, figure: "the same, no budget, the database behind a Shedder: load", published: 1, said: "no figure; back to normal or below",
			ours: loadShed, unit: "x", tol: tolerance{lo: 0.75, hi: 1.05}},
		row{source: srcHotOS, figure: "the same: queries answered in time", published: 80, said: "no figure; ~80%, the rest shed",
			ours: 100 * served, unit: "%", tol: tolerance{lo: 75, hi: 100}})
	// No source publishes these: each row states what the model implies
	// and holds ours to it.
	goodput, p99, serverP99, _ := halved(seed)
	half := float64(halvedScenario().capacity) / 2
	rep.rows = append(rep.rows,
		row{source: srcOurs, figure: "250/s into 300/s, capacity halved for 60 s, the Transport's defaults: answered per second", published: 0,
			said: "none in time: the queue outgrows the timeout", ours: goodput[0], unit: "/s", tol: tolerance{lo: 0, hi: 0.1 * half}},
		row{source: srcOurs, figure: "the same: p99 at the server", published: 0, said: "the backlog: tens of seconds",
			ours: serverP99[0], unit: "ms", tol: tolerance{lo: 10_000, hi: math.Inf(1)}},
		row{source: srcOurs, figure: "the same with the client limit: answered per second", published: 0.75 * half, said: "~1.5 in flight served in order, ~110/s",
			ours: goodput[1], unit: "/s", tol: tolerance{lo: 0.65 * half, hi: half}},
		row{source: srcOurs, figure: "the same with the client limit: p99 at the server", published: 0, said: "a few service times, well within the 1 s timeout",
			ours: serverP99[1], unit: "ms", tol: tolerance{lo: 0, hi: 100}},
		row{source: srcOurs, figure: "the same with the client limit: p99 of the answered", published: 0, said: "a few service times, well within the 1 s timeout",
			ours: p99[1], unit: "ms", tol: tolerance{lo: 0, hi: 100}})
	ours, aws, servedRatio := awsAgainstDefaults(seed)
	sc := stormThrottled()
	rep.rows = append(rep.rows,
		row{source: srcOurs, figure: "900/s into 1,000/s, 2 s outage, rejections as 429s, the Transport's defaults: load", published: 0,
			said: fmt.Sprintf("at most the budget's %.3fx", budgetBound(sc, 1)), ours: ours, unit: "x", tol: tolerance{lo: 1, hi: budgetBound(sc, 1)}},
		row{source: srcOurs, figure: "the same, the AWS standard mode's values: load", published: 0,
			said: fmt.Sprintf("more, at most %.3fx (a throttled retry costs 5/14)", budgetBound(sc, 5.0/14)), ours: aws, unit: "x",
			tol: tolerance{lo: ours, hi: budgetBound(sc, 5.0/14)}},
		row{source: srcOurs, figure: "the same: requests served, the AWS values' over ours", published: 1, said: "about the same",
			ours: servedRatio, unit: "x", tol: tolerance{rel: 0.05}})
	rep.rows = append(rep.rows, backpressureRows(seed)...)
	return rep
}

// backpressureRows are the Pacer's and the Shedder's measured
// Retry-After. No source publishes them: each row states the bar it is
// held to.
func backpressureRows(seed uint64) []row {
	pct := func(a, b int) float64 { return 100 * float64(a) / float64(max(1, b)) }
	qc := quotaConfig{quota: 100, window: 10 * time.Second, clients: 8, offered: 3, windows: 20, phase: 300 * time.Millisecond}
	unpaced := runQuota(qc, seed)
	qc.paced = true
	paced := runQuota(qc, seed)
	qc.processes = 4
	fleet := runQuota(qc, seed)
	qc.shared = true
	shared := runQuota(qc, seed)
	const quotaFig = "a quota of 100 a 10 s window, 8 clients offering 3x"
	sc := shedConfig{limit: 8, latency: 40 * time.Millisecond, factor: 3, burst: 2 * time.Second, fixed: true}
	fixed := runShed(sc, seed)
	sc.fixed = false
	measured := runShed(sc, seed)
	fixedReshed := pct(fixed.reshed, fixed.retries)
	const shedFig = "a Shedder serving 200/s offered 600/s for 2 s, retried after Retry-After"
	return []row{
		{source: srcOurs, figure: quotaFig + ", no pacing: 429s of those sent", said: "2 in 3: all past the quota",
			ours: pct(unpaced.tooMany, unpaced.sent), unit: "%", tol: tolerance{lo: 60, hi: 70}},
		{source: srcOurs, figure: "the same through a Pacer: 429s of those sent", said: "at most 1%",
			ours: pct(paced.tooMany, paced.sent), unit: "%", tol: tolerance{lo: 0, hi: 1}},
		{source: srcOurs, figure: "the same through a Pacer: served, of the quota", said: "at least 95%",
			ours: pct(paced.served, qc.quota*qc.windows), unit: "%", tol: tolerance{lo: 95, hi: 100}},
		{source: srcOurs, figure: "the same, the clients in 4 processes sharing one Pacer's window (a PacerStore): 429s of those sent", said: "at most 1%",
			ours: pct(shared.tooMany, shared.sent), unit: "%", tol: tolerance{lo: 0, hi: 1}},
		{source: srcOurs, figure: "the same, 4 processes sharing one window: served, of the quota", said: "at least 90%",
			ours: pct(shared.served, qc.quota*qc.windows), unit: "%", tol: tolerance{lo: 90, hi: 100}},
		{source: srcOurs, figure: "the same, each process with a Pacer of its own: 429s of those sent", said: "more: the key's other users take what each thinks is left",
			ours: pct(fleet.tooMany, fleet.sent), unit: "%", tol: tolerance{lo: pct(shared.tooMany, shared.sent) + 0.5, hi: 100}},
		{source: srcOurs, figure: shedFig + ": 1 s: retries shed again", said: "most",
			ours: fixedReshed, unit: "%", tol: tolerance{lo: 50, hi: 100}},
		{source: srcOurs, figure: "the same, Retry-After measured: retries shed again", said: "at most half as often",
			ours: pct(measured.reshed, measured.retries), unit: "%", tol: tolerance{lo: 0, hi: fixedReshed / 2}},
		{source: srcOurs, figure: "the same, measured: critical served at the first attempt", said: fmt.Sprintf("as with 1 s: %.0f%%", pct(fixed.criticalFirst, fixed.critical)),
			ours: pct(measured.criticalFirst, measured.critical), unit: "%", tol: tolerance{lo: pct(fixed.criticalFirst, fixed.critical) - 1, hi: 100}},
		{source: srcOurs, figure: "the same: served in 8 attempts, 1 s", said: "fewer: the rest give up",
			ours: pct(fixed.served, fixed.requests), unit: "%", tol: tolerance{lo: 0, hi: pct(measured.served, measured.requests) - 0.5}},
		{source: srcOurs, figure: "the same: served in 8 attempts, measured", said: "all",
			ours: pct(measured.served, measured.requests), unit: "%", tol: tolerance{lo: 99, hi: 100}},
		{source: srcOurs, figure: "the same: last shed, 1 s", said: "while the retries last",
			ours: fixed.lastShed.Seconds(), unit: "s", tol: tolerance{lo: 2, hi: 20}},
		{source: srcOurs, figure: "the same: last shed, measured", said: "later: the retries spread over the backlog",
			ours: measured.lastShed.Seconds(), unit: "s", tol: tolerance{lo: fixed.lastShed.Seconds(), hi: 60}},
	}
}

// reproduce prints the table for each seed and writes the charts of the
// first to dir; it returns 1 if any row of any seed is outside its
// tolerance.
func reproduce(stdout, stderr io.Writer, seeds []uint64, dir string) int {
	began := time.Now()
	code := 0
	for i, seed := range seeds {
		rep := reproduceRows(seed)
		fmt.Fprintf(stdout, "retrystorm -reproduce (virtual time, seed %d)\n\n", seed)
		printReproduction(stdout, rep.rows)
		for _, r := range rep.rows {
			if !r.within() {
				code = 1
			}
		}
		if i == 0 && dir != "" {
			paths, err := writeReproductionCharts(dir, rep)
			if err != nil {
				fmt.Fprintf(stderr, "retrystorm: %v\n", err)
				return 1
			}
			fmt.Fprintf(stdout, "\ncharts: %s\n", strings.Join(paths, "\n        "))
		}
		fmt.Fprintln(stdout)
	}
	fmt.Fprintf(stdout, "finished in %v\n", time.Since(began).Round(100*time.Millisecond))
	if code != 0 {
		fmt.Fprintln(stderr, "retrystorm: some rows are outside their tolerance")
	}
	return code
}

func printReproduction(w io.Writer, rows []row) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "source\tfigure\tpublished\tours\ttolerance\twithin\t")
	for _, r := range rows {
		pub := format(r.published, r.unit)
		if r.said != "" {
			pub = r.said
		}
		within := "yes"
		if !r.within() {
			within = "NO"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t\n", r.source, r.figure, pub, format(r.ours, r.unit), r.tol, within)
	}
	tw.Flush()
}

func format(v float64, unit string) string {
	switch {
	case unit == "x":
		return fmt.Sprintf("%.3fx", v)
	case unit == "s":
		return fmt.Sprintf("%.2f s", v)
	case unit != "":
		return fmt.Sprintf("%.1f %s", v, unit)
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.3g", v)
}

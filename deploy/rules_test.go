package deploy

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/util/teststorage"
	"go.yaml.in/yaml/v3"

	"github.com/retryhttp/retryhttp"
	"github.com/retryhttp/retryhttp/idempotency"
	"github.com/retryhttp/retryhttp/outbox"
	"github.com/retryhttp/retryhttp/overload"
	"github.com/retryhttp/retryhttp/queue"
	"github.com/retryhttp/retryhttp/queue/kafka"
	"github.com/retryhttp/retryhttp/queue/natsjs"
	"github.com/retryhttp/retryhttp/queue/rabbitmq"
	"github.com/retryhttp/retryhttp/queue/sqs"
	"github.com/retryhttp/retryhttp/shared/pgtest"
)

// rulesFile is the part of a Prometheus rules file the tests read.
type rulesFile struct {
	Groups []struct {
		Name  string
		Rules []struct {
			Record, Alert, Expr string
		}
	}
}

// dashboard is the part of the Grafana dashboard the tests read.
type dashboard struct {
	Panels []struct {
		Title   string
		Type    string
		Targets []struct{ Expr string }
	}
}

// Every recording rule, every alert and every dashboard expression,
// evaluated with the PromQL engine over what the library exported while it
// ran under faults (a flaky dependency behind a Transport with its budget,
// breaker, throttle and hedging; the idempotency middleware with duplicate
// and mismatched keys; an outbox relay with a receiver that refuses some
// messages): each parses, names only series and labels the library
// exports (or rules record), and, for recording rules and dashboard
// panels, returns something.
func TestExpressionsOnTheLibrarysMetrics(t *testing.T) {
	var rules rulesFile
	readYAML(t, "prometheus/retryhttp-rules.yml", &rules)
	var dash dashboard
	raw, err := os.ReadFile("grafana/retryhttp.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatal(err)
	}

	reg := prometheus.NewRegistry()
	scrapes := exercise(t, reg)

	// The scrapes go into a TSDB 15 s apart, as a Prometheus scraping every
	// 15 s would store them; the recording rules are evaluated at each, in
	// order, and their results stored with them, as the rule manager does.
	st := teststorage.New(t)
	engine := promql.NewEngine(promql.EngineOpts{MaxSamples: 10_000_000, Timeout: time.Minute, LookbackDelta: 5 * time.Minute})
	start := time.Unix(1_800_000_000, 0)
	exported := map[string]map[string]bool{} // series name -> its label names
	var at time.Time
	for i, fams := range scrapes {
		at = start.Add(time.Duration(i) * 15 * time.Second)
		app := st.Appender(context.Background())
		for _, f := range fams {
			for _, s := range flatten(f) {
				addLabels(exported, s.lbls)
				if _, err := app.Append(0, s.lbls, at.UnixMilli(), s.value); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := app.Commit(); err != nil {
			t.Fatal(err)
		}
		for _, g := range rules.Groups {
			for _, r := range g.Rules {
				if r.Record == "" {
					continue
				}
				v := instant(t, engine, st, r.Expr, at)
				app := st.Appender(context.Background())
				for _, s := range v {
					b := labels.NewBuilder(s.Metric)
					b.Set(labels.MetricName, r.Record)
					l := b.Labels()
					addLabels(exported, l)
					if _, err := app.Append(0, l, at.UnixMilli(), s.F); err != nil {
						t.Fatal(err)
					}
				}
				if err := app.Commit(); err != nil {
					t.Fatal(err)
				}
			}
		}
	}

	check := func(what, expr string, mustReturn bool) {
		t.Helper()
		if err := namesExported(expr, exported); err != nil {
			t.Errorf("%s: %s: %v", what, expr, err)
			return
		}
		if v := instant(t, engine, st, expr, at); mustReturn && len(v) == 0 {
			t.Errorf("%s: %s returns nothing on the library's metrics", what, expr)
		}
	}
	n := 0
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			n++
			if r.Record != "" {
				check("recording rule "+r.Record, r.Expr, true)
			} else {
				check("alert "+r.Alert, r.Expr, false) // not firing is right for most
			}
		}
	}
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			n++
			check("panel "+strconv.Quote(p.Title), tg.Expr, true)
		}
	}
	// Every consumer that ended messages shows in the dead-letter rate.
	for _, b := range []string{"nats", "rabbitmq", "kafka", "sqs"} {
		check("queue:dead:rate5m of broker "+b, `queue:dead:rate5m{broker="`+b+`"} > 0`, true)
	}
	t.Logf("%d expressions evaluated over %d scrapes of %d series names", n, len(scrapes), len(exported))
}

// exercise runs the library under faults with its metrics on reg, and
// returns a scrape of reg taken every 100 ms.
func exercise(t *testing.T, reg *prometheus.Registry) [][]*dto.MetricFamily {
	t.Helper()
	quiet := slog.New(slog.DiscardHandler)
	metrics, err := retryhttp.NewMetrics(reg, retryhttp.MetricsOptions{HostLabel: 8})
	if err != nil {
		t.Fatal(err)
	}
	idem, err := idempotency.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}

	// A dependency that fails one request in three, and one host that is
	// down: retries, give-ups, an open circuit, throttling, hedges.
	var served atomic.Int64
	flaky := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch n := served.Add(1); {
		case n%3 == 0:
			w.WriteHeader(http.StatusServiceUnavailable)
		case n%7 == 0:
			time.Sleep(30 * time.Millisecond) // a straggler, for the hedges
		}
	}))
	defer flaky.Close()
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusBadGateway) }))
	defer down.Close()
	// A host that rejects nearly everything with 429, which the breaker
	// leaves to the throttle.
	var limitedN atomic.Int64
	limited := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if limitedN.Add(1)%10 != 0 {
			w.WriteHeader(http.StatusTooManyRequests)
		}
	}))
	defer limited.Close()
	breaker, _ := retryhttp.NewBreaker(retryhttp.BreakerOptions{Failures: 3, OpenFor: time.Hour})
	budget, _ := retryhttp.NewBudget(retryhttp.BudgetOptions{Ratio: 0.05, MinPerSecond: 1})
	tr := &retryhttp.Transport{Hooks: []retryhttp.Hook{metrics}, Logger: quiet, Breaker: breaker, Budget: budget, Throttle: &retryhttp.Throttle{},
		Hedge: &retryhttp.Hedging{Delay: 10 * time.Millisecond}, InjectIdempotencyKey: true,
		Policy: retryhttp.Policy{MaxAttempts: 3, BaseDelay: time.Millisecond, MaxDelay: 2 * time.Millisecond}}
	client := &http.Client{Transport: tr}
	defer tr.CloseIdleConnections()

	// The middleware, behind a Transport of its own above another: keys
	// sent twice (replays), reused with another payload (mismatches), and
	// a stacked retry.
	mw, err := idempotency.New(idempotency.Options{Hooks: []idempotency.Hook{idem}, Logger: quiet, CacheEntries: 100})
	if err != nil {
		t.Fatal(err)
	}
	api := httptest.NewServer(mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(201) })))
	defer api.Close()
	inner := &retryhttp.Transport{Hooks: []retryhttp.Hook{metrics}, Logger: quiet}
	outer := &http.Client{Transport: &retryhttp.Transport{Base: inner, Hooks: []retryhttp.Hook{metrics}, Logger: quiet}}

	// A host slower than its callers are many, behind a concurrency limit
	// without a queue (refusals, a limit that moves), and a service whose
	// Shedder sheds its sheddable requests.
	ovm, err := overload.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	limiter, _ := overload.NewLimiter(overload.Options{Max: 4, Name: "payments", Hooks: []overload.Hook{ovm}})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { time.Sleep(5 * time.Millisecond) }))
	defer slow.Close()
	limitedClient := &http.Client{Transport: &retryhttp.Transport{Hooks: []retryhttp.Hook{metrics}, Logger: quiet, Limit: limiter}}
	shedder, _ := overload.NewShedder(overload.ShedOptions{Limit: overload.Options{Min: 2, Max: 2, Name: "api", Hooks: []overload.Hook{ovm}}})
	shedding := httptest.NewServer(shedder.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { time.Sleep(5 * time.Millisecond) })))
	defer shedding.Close()
	burst := func() {
		var wg sync.WaitGroup
		for i := range 8 {
			wg.Go(func() {
				if resp, err := limitedClient.Get(slow.URL); err == nil {
					resp.Body.Close()
				}
				req, _ := http.NewRequest(http.MethodGet, shedding.URL, nil)
				req.Header.Set(overload.PriorityHeader, []string{"critical", "sheddable"}[i%2])
				if resp, err := http.DefaultClient.Do(req); err == nil {
					resp.Body.Close()
				}
			})
		}
		wg.Wait()
	}

	relayStop := relay(t, reg)
	defer relayStop()

	// Four queue consumers' metrics: told what a consumer wrapper tells
	// its hooks, deliveries processed, duplicated, failed and redelivered,
	// and dead.
	natsMetrics, err := natsjs.NewMetrics(reg, "fulfilment")
	if err != nil {
		t.Fatal(err)
	}
	rabbitMetrics, err := rabbitmq.NewMetrics(reg, "emails")
	if err != nil {
		t.Fatal(err)
	}
	kafkaMetrics, err := kafka.NewMetrics(reg, "shipping")
	if err != nil {
		t.Fatal(err)
	}
	sqsMetrics, err := sqs.NewMetrics(reg, "receipts")
	if err != nil {
		t.Fatal(err)
	}
	consume := func(round int) {
		for i := range 10 {
			k := []queue.EventKind{queue.EventProcessed, queue.EventProcessed, queue.EventDuplicate, queue.EventFailed}[i%4]
			if i == 9 && round%5 == 0 {
				k = queue.EventDead
			}
			natsMetrics.OnEvent(context.Background(), natsjs.Event{Kind: k, Attempt: 1 + i%3})
			rk := []queue.EventKind{queue.EventProcessed, queue.EventDuplicate, queue.EventFailed}[i%3]
			if i == 9 && round%5 == 0 {
				rk = queue.EventDead
			}
			rabbitMetrics.OnEvent(context.Background(), rabbitmq.Event{Kind: rk, Attempt: 1 + i%2})
			kafkaMetrics.OnEvent(context.Background(), kafka.Event{Kind: rk, Attempt: 1 + i%2})
			sqsMetrics.OnEvent(context.Background(), sqs.Event{Kind: rk, Attempt: 1 + i%2})
		}
	}

	var scrapes [][]*dto.MetricFamily
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 40 {
		for i := range 10 {
			get := func(url string) {
				if resp, err := client.Get(url); err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			}
			get(flaky.URL + "/items")
			get(down.URL + "/items")
			get(limited.URL + "/items")
			key := fmt.Sprintf("order-%d-%d", round, i)
			for _, body := range []string{`{"amount":1}`, `{"amount":1}`, `{"amount":2}`} { // new, replayed, mismatch
				req, _ := http.NewRequest("POST", api.URL+"/charges", strings.NewReader(body))
				req.Header.Set("Idempotency-Key", key)
				if resp, err := outer.Do(req); err == nil {
					resp.Body.Close()
				}
			}
			if rng.IntN(4) == 0 {
				req, _ := http.NewRequest("POST", api.URL+"/charges", strings.NewReader(`{}`)) // no key
				if resp, err := client.Do(req); err == nil {
					resp.Body.Close()
				}
			}
		}
		consume(round)
		burst()
		fams, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		scrapes = append(scrapes, fams)
		time.Sleep(10 * time.Millisecond)
	}
	return scrapes
}

// relay runs an outbox relay on the local PostgreSQL with its metrics on
// reg, delivering to a receiver that refuses one message in four for
// good, and returns a function that stops it and drops its table.
func relay(t *testing.T, reg *prometheus.Registry) func() {
	t.Helper()
	ctx := context.Background()
	pool := pgtest.Pool(t)
	table := fmt.Sprintf("outbox_rules_%d", time.Now().UnixNano())
	box, err := outbox.New(pool, table)
	if err != nil {
		t.Fatal(err)
	}
	if err := box.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	m, err := outbox.NewMetrics(reg, box)
	if err != nil {
		t.Fatal(err)
	}
	var n atomic.Int64
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1)%4 == 0 {
			w.WriteHeader(http.StatusUnprocessableEntity)
		}
	}))
	for range 40 {
		if _, err := box.Enqueue(ctx, pool, outbox.Message{URL: receiver.URL}); err != nil {
			t.Fatal(err)
		}
	}
	// Messages that wait: addressed to a port where nothing listens, they
	// are retried later, and pending meanwhile.
	for range 3 {
		if _, err := box.Enqueue(ctx, pool, outbox.Message{URL: "http://127.0.0.1:1/"}); err != nil {
			t.Fatal(err)
		}
	}
	r, err := outbox.NewRelay(outbox.RelayOptions{Outbox: box, Hooks: []outbox.Hook{m}, PollInterval: 10 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); r.Run(rctx) }()
	return func() {
		cancel()
		<-done
		receiver.Close()
		pool.Exec(context.Background(), "DROP TABLE IF EXISTS "+table)
		pool.Exec(context.Background(), "DELETE FROM retryhttp_schema_versions WHERE name = $1", table)
		pool.Close()
	}
}

type sample struct {
	lbls  labels.Labels
	value float64
}

// flatten turns a gathered family into the series a scrape stores: a
// histogram as _bucket{le}, _sum and _count.
func flatten(f *dto.MetricFamily) []sample {
	var out []sample
	for _, m := range f.Metric {
		base := map[string]string{}
		for _, l := range m.Label {
			base[l.GetName()] = l.GetValue()
		}
		with := func(name string, extra map[string]string, v float64) {
			kv := []string{labels.MetricName, name}
			for k, v := range base {
				kv = append(kv, k, v)
			}
			for k, v := range extra {
				kv = append(kv, k, v)
			}
			out = append(out, sample{labels.FromStrings(kv...), v})
		}
		switch f.GetType() {
		case dto.MetricType_COUNTER:
			with(f.GetName(), nil, m.Counter.GetValue())
		case dto.MetricType_GAUGE:
			with(f.GetName(), nil, m.Gauge.GetValue())
		case dto.MetricType_HISTOGRAM:
			h := m.Histogram
			for _, b := range h.Bucket {
				with(f.GetName()+"_bucket", map[string]string{"le": strconv.FormatFloat(b.GetUpperBound(), 'g', -1, 64)}, float64(b.GetCumulativeCount()))
			}
			with(f.GetName()+"_bucket", map[string]string{"le": "+Inf"}, float64(h.GetSampleCount()))
			with(f.GetName()+"_sum", nil, h.GetSampleSum())
			with(f.GetName()+"_count", nil, float64(h.GetSampleCount()))
		}
	}
	return out
}

func addLabels(exported map[string]map[string]bool, l labels.Labels) {
	name := l.Get(labels.MetricName)
	if exported[name] == nil {
		exported[name] = map[string]bool{}
	}
	l.Range(func(lb labels.Label) { exported[name][lb.Name] = true })
}

// namesExported reports a series name, or a label in a matcher or a
// grouping, that no exported series has.
func namesExported(expr string, exported map[string]map[string]bool) error {
	e, err := parser.NewParser(parser.Options{}).ParseExpr(expr)
	if err != nil {
		return err
	}
	var names []string
	var problem error
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		if vs, ok := n.(*parser.VectorSelector); ok {
			lbls, ok := exported[vs.Name]
			if !ok {
				problem = fmt.Errorf("no exported series is named %s", vs.Name)
				return problem
			}
			names = append(names, vs.Name)
			for _, m := range vs.LabelMatchers {
				if m.Name != labels.MetricName && !lbls[m.Name] {
					problem = fmt.Errorf("%s has no label %s", vs.Name, m.Name)
					return problem
				}
			}
		}
		return nil
	})
	if problem != nil {
		return problem
	}
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		if ag, ok := n.(*parser.AggregateExpr); ok && !ag.Without {
			for _, g := range ag.Grouping {
				if !slices.ContainsFunc(names, func(name string) bool { return exported[name][g] }) {
					problem = fmt.Errorf("no series it reads has the label %s it groups by", g)
					return problem
				}
			}
		}
		return nil
	})
	return problem
}

func instant(t *testing.T, engine *promql.Engine, q storage.Queryable, expr string, at time.Time) promql.Vector {
	t.Helper()
	qry, err := engine.NewInstantQuery(context.Background(), q, nil, expr, at)
	if err != nil {
		t.Fatalf("%s: %v", expr, err)
	}
	defer qry.Close()
	res := qry.Exec(context.Background())
	if res.Err != nil {
		t.Fatalf("%s: %v", expr, res.Err)
	}
	switch v := res.Value.(type) {
	case promql.Vector:
		return v
	case promql.Scalar:
		return promql.Vector{{F: v.V}}
	}
	t.Fatalf("%s: a %T, not a vector", expr, res.Value)
	return nil
}

func readYAML(t *testing.T, path string, v any) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(raw, v); err != nil {
		t.Fatal(err)
	}
}

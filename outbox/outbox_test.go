package outbox_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"

	"github.com/retryhttp/retryhttp"
	"github.com/retryhttp/retryhttp/idempotency"
	"github.com/retryhttp/retryhttp/outbox"
	"github.com/retryhttp/retryhttp/outbox/internal/outboxtest"
	"github.com/retryhttp/retryhttp/queue"
	"github.com/retryhttp/retryhttp/shared/faultproxy"
	"github.com/retryhttp/retryhttp/shared/testenv"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// receiver records the requests it gets.
type receiver struct {
	mu     sync.Mutex
	reqs   []*http.Request
	bodies []string
	at     []time.Time
	status func(n int) int
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	rc.mu.Lock()
	rc.reqs = append(rc.reqs, r)
	rc.bodies = append(rc.bodies, string(b))
	rc.at = append(rc.at, time.Now())
	n := len(rc.reqs)
	rc.mu.Unlock()
	code := 200
	if rc.status != nil {
		code = rc.status(n)
	}
	w.WriteHeader(code)
}

func (rc *receiver) count() int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return len(rc.reqs)
}

// allDelivered waits until no message of o is pending or dead.
func allDelivered(t *testing.T, p *pgxpool.Pool, o *outbox.Outbox) {
	t.Helper()
	outboxtest.Eventually(t, "all delivered", func() bool {
		var pending int
		p.QueryRow(context.Background(), "SELECT count(*) FROM "+tableName(o)+" WHERE status <> 'delivered'").Scan(&pending)
		return pending == 0
	})
}

// onceEach fails unless n distinct keys each had exactly one effect: none
// lost, none doubled.
func onceEach(t *testing.T, effects map[string]int, n int) {
	t.Helper()
	if len(effects) != n {
		t.Fatalf("%d messages had an effect, want %d: none lost", len(effects), n)
	}
	for k, c := range effects {
		if c != 1 {
			t.Fatalf("message %s had %d effects, want 1", k, c)
		}
	}
}

func state(t *testing.T, o *outbox.Outbox, id string) outbox.State {
	s, err := o.State(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// A message exists if and only if its transaction commits, and is
// delivered with its ID as Idempotency-Key, method, header and body kept.
func TestCommittedMessagesAreDelivered(t *testing.T) {
	p := outboxtest.Pool(t)
	ctx := context.Background()
	testCommittedMessagesAreDelivered(t, outboxtest.New(t, p), p, func() (outbox.Querier, func() error, func()) {
		tx, err := p.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return tx, func() error { return tx.Commit(ctx) }, func() { tx.Rollback(ctx) }
	})
}

// testCommittedMessagesAreDelivered runs on o, writing through db, and
// through the transactions begin opens (with their commit and rollback).
func testCommittedMessagesAreDelivered(t *testing.T, o *outbox.Outbox, db outbox.Querier, begin func() (tx outbox.Querier, commit func() error, rollback func())) {
	rc := &receiver{}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	ctx := context.Background()

	tx, commit, _ := begin()
	id, err := o.Enqueue(ctx, tx, outbox.Message{Method: "PUT", URL: srv.URL + "/mail", Header: http.Header{"X-Kind": {"receipt"}}, Body: []byte(`{"order":1}`)})
	if err != nil {
		t.Fatal(err)
	}
	if err := commit(); err != nil {
		t.Fatal(err)
	}
	tx, _, rollback := begin()
	if _, err := o.Enqueue(ctx, tx, outbox.Message{URL: srv.URL + "/rolled-back"}); err != nil {
		t.Fatal(err)
	}
	rollback()

	events := &eventLog{}
	outboxtest.Run(t, outbox.RelayOptions{Outbox: o, PollInterval: 10 * time.Millisecond, Hooks: []outbox.Hook{events.hook()}})
	outboxtest.Eventually(t, "delivery", func() bool { return state(t, o, id).Status == outbox.Delivered })
	time.Sleep(100 * time.Millisecond)
	if got := events.list(); !slices.Equal(got, []string{"delivered " + id + " 200 0"}) {
		t.Errorf("hook events %q, want the one delivery", got)
	}
	if rc.count() != 1 {
		t.Fatalf("%d deliveries, want 1 (the rolled-back message does not exist)", rc.count())
	}
	r := rc.reqs[0]
	if r.Method != "PUT" || r.URL.Path != "/mail" || r.Header.Get("X-Kind") != "receipt" || rc.bodies[0] != `{"order":1}` {
		t.Fatalf("delivered %s %s %v %q", r.Method, r.URL.Path, r.Header, rc.bodies[0])
	}
	if got := r.Header.Get("Idempotency-Key"); got != id {
		t.Fatalf("Idempotency-Key %q, want the message ID %q", got, id)
	}
	if s := state(t, o, id); s.Deliveries != 1 || s.LastStatus != 200 || s.LastError != "" {
		t.Fatalf("state %+v, want delivered once with 200", s)
	}
	if _, err := o.Enqueue(ctx, db, outbox.Message{URL: "/relative"}); err == nil {
		t.Fatal("a relative URL was accepted")
	}
	if _, err := o.Enqueue(ctx, struct{}{}, outbox.Message{URL: srv.URL}); err == nil || !strings.Contains(err.Error(), "not a struct {}") {
		t.Fatalf("Enqueue through a struct{}: %v, want an error naming what it takes", err)
	}
}

// LISTEN/NOTIFY: a committed message is delivered at once, not at the next
// poll a minute later.
func TestNotifyWakesTheRelay(t *testing.T) {
	p := outboxtest.Pool(t)
	o := outboxtest.New(t, p)
	rc := &receiver{}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	outboxtest.Run(t, outbox.RelayOptions{Outbox: o, PollInterval: time.Minute})
	time.Sleep(200 * time.Millisecond) // the relay has polled once and is listening
	start := time.Now()
	id, err := o.Enqueue(context.Background(), p, outbox.Message{URL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	outboxtest.Eventually(t, "delivery", func() bool { return state(t, o, id).Status == outbox.Delivered })
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("delivered after %v: the notification did not wake the relay", d)
	}
}

// Failures are retried with the relay's Backoff, then the message is
// dead; a refusal for good is dead at once. The metrics count each.
func TestBackoffAndDeadLetter(t *testing.T) {
	p := outboxtest.Pool(t)
	testBackoffAndDeadLetter(t, outboxtest.New(t, p), p)
}

func testBackoffAndDeadLetter(t *testing.T, o *outbox.Outbox, p outbox.Querier) {
	reg := prometheus.NewRegistry()
	m, err := outbox.NewMetrics(reg, o)
	if err != nil {
		t.Fatal(err)
	}
	down := &receiver{status: func(int) int { return 503 }}
	bad := &receiver{status: func(int) int { return 422 }}
	srvDown, srvBad := httptest.NewServer(down), httptest.NewServer(bad)
	defer srvDown.Close()
	defer srvBad.Close()
	ctx := context.Background()
	idDown, _ := o.Enqueue(ctx, p, outbox.Message{URL: srvDown.URL})
	idBad, _ := o.Enqueue(ctx, p, outbox.Message{URL: srvBad.URL})
	if got := gauge(t, reg, "outbox_pending"); got != 2 {
		t.Fatalf("outbox_pending %v, want 2", got)
	}
	events := &eventLog{}
	outboxtest.Run(t, outbox.RelayOptions{Outbox: o, Hooks: []outbox.Hook{m, events.hook()}, PollInterval: 5 * time.Millisecond,
		MaxDeliveries: 3, Backoff: queue.Backoff{Base: 30 * time.Millisecond, Max: 30 * time.Millisecond, Jitter: retryhttp.JitterNone}})
	// The relay tells its hooks once the outcome is written: wait for both,
	// the metrics hook being told before the event log.
	outboxtest.Eventually(t, "both dead and told", func() bool {
		return state(t, o, idDown).Status == outbox.Dead && state(t, o, idBad).Status == outbox.Dead && len(events.list()) >= 4
	})
	if s := state(t, o, idDown); s.Deliveries != 3 || s.LastStatus != 503 || down.count() != 3 {
		t.Fatalf("the 503 message: %+v after %d requests; want dead after 3", s, down.count())
	}
	if s := state(t, o, idBad); s.Deliveries != 1 || s.LastStatus != 422 {
		t.Fatalf("the 422 message: %+v; want dead after 1", s)
	}
	keys := map[string]bool{}
	for _, r := range down.reqs {
		keys[r.Header.Get("Idempotency-Key")] = true
	}
	if len(keys) != 1 {
		t.Fatalf("the retries carried %d keys, want 1", len(keys))
	}
	for i := 1; i < len(down.at); i++ {
		if gap := down.at[i].Sub(down.at[i-1]); gap < 30*time.Millisecond {
			t.Errorf("delivery %d came %v after the one before, want the 30 ms backoff", i+1, gap)
		}
	}
	if got := counter(t, reg, "retried"); got != 2 {
		t.Errorf("retried %v, want 2", got)
	}
	if got := counter(t, reg, "dead"); got != 2 {
		t.Errorf("dead %v, want 2", got)
	}
	if got := gauge(t, reg, "outbox_pending"); got != 0 {
		t.Errorf("pending %v, want 0", got)
	}
	// The hook is told what the counters count, message by message.
	got := events.list()
	want := []string{"retried " + idDown + " 503 1", "retried " + idDown + " 503 2", "dead " + idDown + " 503 3", "dead " + idBad + " 422 1"}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("hook events %q, want %q", got, want)
	}
}

// eventLog records each event as "kind id status deliveries".
type eventLog struct {
	mu     sync.Mutex
	events []string
}

// hook is a HookFunc that logs each event in l.
func (l *eventLog) hook() outbox.Hook {
	return outbox.HookFunc(func(_ context.Context, e outbox.Event) {
		l.mu.Lock()
		defer l.mu.Unlock()
		if e.Table == "" {
			panic("event without its table")
		}
		l.events = append(l.events, fmt.Sprintf("%s %s %d %d", e.Kind, e.ID, e.Status, e.Deliveries))
	})
}

func (l *eventLog) list() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.events)
}

func counter(t *testing.T, reg *prometheus.Registry, outcome string) float64 {
	t.Helper()
	v, _ := testenv.Sum(t, reg, "outbox_deliveries_total", map[string]string{"outcome": outcome})
	return v
}

func gauge(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	v, ok := testenv.Sum(t, reg, name, nil)
	if !ok {
		t.Fatalf("no %s", name)
	}
	return v
}

// The backlog gauges read the table.
func TestBacklogMetrics(t *testing.T) {
	p := outboxtest.Pool(t)
	testBacklogMetrics(t, outboxtest.New(t, p), p)
}

func testBacklogMetrics(t *testing.T, o *outbox.Outbox, p outbox.Querier) {
	reg := prometheus.NewRegistry()
	if _, err := outbox.NewMetrics(reg, o); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := o.Enqueue(context.Background(), p, outbox.Message{URL: "http://127.0.0.1:1/"}); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(50 * time.Millisecond)
	if got := gauge(t, reg, "outbox_pending"); got != 3 {
		t.Fatalf("pending %v, want 3", got)
	}
	if got := gauge(t, reg, "outbox_oldest_pending_seconds"); got < 0.04 || got > 5 {
		t.Fatalf("oldest %v s, want about 0.05", got)
	}
}

// Four relays on one outbox: every message delivered exactly once (leases
// with SKIP LOCKED: no two relays hold one message).
func TestConcurrentRelays(t *testing.T) {
	p := outboxtest.Pool(t)
	o := outboxtest.New(t, p)
	testConcurrentRelays(t, o, p, func() int { return outboxtest.Pending(t, p, o) })
}

// testConcurrentRelays runs on o, writing through p; notDelivered counts
// the messages not delivered yet.
func testConcurrentRelays(t *testing.T, o *outbox.Outbox, p outbox.Querier, notDelivered func() int) {
	var mu sync.Mutex
	perKey := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		perKey[r.Header.Get("Idempotency-Key")]++
		mu.Unlock()
	}))
	defer srv.Close()
	const n = 400
	for range n {
		if _, err := o.Enqueue(context.Background(), p, outbox.Message{URL: srv.URL}); err != nil {
			t.Fatal(err)
		}
	}
	for range 4 {
		outboxtest.Run(t, outbox.RelayOptions{Outbox: o, Batch: 16, PollInterval: 5 * time.Millisecond})
	}
	outboxtest.Eventually(t, "all delivered", func() bool { return notDelivered() == 0 })
	mu.Lock()
	defer mu.Unlock()
	onceEach(t, perKey, n)
}

// The relay is killed (SIGKILL) while its deliveries are at the receiver.
// Another relay delivers them again after the lease, with the same keys;
// the receiver's idempotency middleware recognises them: every message's
// effect happens once, none is lost.
func TestRelayKilledMidDelivery(t *testing.T) {
	if os.Getenv("OUTBOX_CHILD_TABLE") != "" {
		t.Skip("in the child")
	}
	p := outboxtest.Pool(t)
	o := outboxtest.New(t, p)
	mw, err := idempotency.New(idempotency.Options{Logger: outboxtest.Quiet})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	effects := map[string]int{}
	arrived := make(chan struct{}, 100)
	hold := make(chan struct{})
	var held atomic.Int32
	srv := httptest.NewServer(mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if held.Add(1) <= 5 { // the first deliveries wait until their relay is dead
			arrived <- struct{}{}
			<-hold
		}
		mu.Lock()
		effects[r.Header.Get("Idempotency-Key")]++
		mu.Unlock()
		w.WriteHeader(201)
	})))
	defer srv.Close()
	defer close(hold)
	const n = 20
	for range n {
		if _, err := o.Enqueue(context.Background(), p, outbox.Message{URL: srv.URL + "/emails"}); err != nil {
			t.Fatal(err)
		}
	}
	child := exec.Command(os.Args[0], "-test.run=^TestChildRelay$")
	child.Env = append(os.Environ(), "OUTBOX_CHILD_TABLE="+tableName(o))
	child.Stdout, child.Stderr = io.Discard, os.Stderr
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	for range 5 {
		select {
		case <-arrived:
		case <-time.After(10 * time.Second):
			child.Process.Kill()
			t.Fatal("the child relay delivered nothing")
		}
	}
	child.Process.Signal(syscall.SIGKILL) // five deliveries are at the receiver, unanswered
	child.Wait()
	for range 5 {
		hold <- struct{}{} // their handlers finish: the effects happen, the answers are lost
	}
	outboxtest.Run(t, outbox.RelayOptions{Outbox: o, Lease: time.Second, PollInterval: 20 * time.Millisecond,
		Client: &http.Client{Timeout: 500 * time.Millisecond}})
	allDelivered(t, p, o)
	mu.Lock()
	defer mu.Unlock()
	onceEach(t, effects, n)
}

// TestChildRelay is the relay TestRelayKilledMidDelivery kills.
func TestChildRelay(t *testing.T) {
	table := os.Getenv("OUTBOX_CHILD_TABLE")
	if table == "" {
		t.Skip("run by TestRelayKilledMidDelivery")
	}
	p := outboxtest.Pool(t)
	o, err := outbox.New(p, table)
	if err != nil {
		t.Fatal(err)
	}
	r, err := outbox.NewRelay(outbox.RelayOptions{Outbox: o, Lease: time.Second, Batch: 5, Logger: outboxtest.Quiet,
		Client: &http.Client{Timeout: 500 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	r.Run(context.Background())
}

func tableName(o *outbox.Outbox) string { return o.Table() }

// A receiver asking for a wait past MaxRetryAfter cannot park a message:
// the delivery counts as failed and backs off by the relay's Backoff.
func TestHugeRetryAfterIsNotHonoured(t *testing.T) {
	p := outboxtest.Pool(t)
	o := outboxtest.New(t, p)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "999999999")
		w.WriteHeader(503)
	}))
	defer srv.Close()
	id, err := o.Enqueue(context.Background(), p, outbox.Message{URL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	outboxtest.Run(t, outbox.RelayOptions{Outbox: o, PollInterval: 5 * time.Millisecond,
		MaxDeliveries: 3, Backoff: queue.Backoff{Base: 20 * time.Millisecond, Max: 20 * time.Millisecond, Jitter: retryhttp.JitterNone}})
	outboxtest.Eventually(t, "dead after its attempts", func() bool { return state(t, o, id).Status == outbox.Dead })
	if s := state(t, o, id); s.Deliveries != 3 {
		t.Fatalf("%+v, want dead after 3 deliveries, not parked for 31 years", s)
	}
}

// One receiver that hangs delays only its own message: the others of its
// batch are delivered meanwhile.
func TestHungReceiverDelaysOnlyItsMessage(t *testing.T) {
	p := outboxtest.Pool(t)
	o := outboxtest.New(t, p)
	release := make(chan struct{})
	hung := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer hung.Close()
	defer close(release)
	ok := &receiver{status: func(int) int { return 200 }}
	healthy := httptest.NewServer(ok)
	defer healthy.Close()
	ctx := context.Background()
	hungID, _ := o.Enqueue(ctx, p, outbox.Message{URL: hung.URL})
	var ids []string
	for range 10 {
		id, _ := o.Enqueue(ctx, p, outbox.Message{URL: healthy.URL})
		ids = append(ids, id)
	}
	start := time.Now()
	outboxtest.Run(t, outbox.RelayOptions{Outbox: o, PollInterval: 5 * time.Millisecond, Client: &http.Client{Timeout: 20 * time.Second}})
	outboxtest.Eventually(t, "the healthy messages delivered", func() bool {
		for _, id := range ids {
			if state(t, o, id).Status != outbox.Delivered {
				return false
			}
		}
		return true
	})
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("healthy messages took %v behind a hung receiver", took)
	}
	if s := state(t, o, hungID); s.Status != outbox.Pending {
		t.Fatalf("the hung message: %+v, want still pending", s)
	}
}

// Logs and last_error never show a URL's query string or user info.
func TestDeadMessageURLIsRedacted(t *testing.T) {
	p := outboxtest.Pool(t)
	o := outboxtest.New(t, p)
	var logs strings.Builder
	var mu sync.Mutex
	logger := slog.New(slog.NewTextHandler(writerFunc(func(b []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return logs.Write(b)
	}), nil))
	id, _ := o.Enqueue(context.Background(), p, outbox.Message{URL: "http://user:pw@127.0.0.1:1/hook?token=s3cret"})
	outboxtest.Run(t, outbox.RelayOptions{Outbox: o, PollInterval: 5 * time.Millisecond, Logger: logger,
		MaxDeliveries: 2, Backoff: queue.Backoff{Base: 10 * time.Millisecond, Max: 10 * time.Millisecond}})
	outboxtest.Eventually(t, "dead", func() bool { return state(t, o, id).Status == outbox.Dead })
	s := state(t, o, id)
	mu.Lock()
	defer mu.Unlock()
	for what, text := range map[string]string{"last_error": s.LastError, "logs": logs.String()} {
		if strings.Contains(text, "s3cret") || strings.Contains(text, "pw@") {
			t.Fatalf("%s shows the URL's secrets: %s", what, text)
		}
	}
	if !strings.Contains(s.LastError, "127.0.0.1:1/hook") {
		t.Fatalf("last_error %q does not name the endpoint", s.LastError)
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }

func TestStateOfUnknownID(t *testing.T) {
	o := outboxtest.New(t, outboxtest.Pool(t))
	if _, err := o.State(context.Background(), "no-such-id"); !errors.Is(err, outbox.ErrNotFound) {
		t.Fatalf("State: %v, want ErrNotFound", err)
	}
}

// The default Client works with a short Lease.
func TestDefaultClientWithShortLease(t *testing.T) {
	o := outboxtest.New(t, outboxtest.Pool(t))
	if _, err := outbox.NewRelay(outbox.RelayOptions{Outbox: o, Lease: 3 * time.Second}); err != nil {
		t.Fatal(err)
	}
}

// The database goes away just as a receiver accepts a message, and comes
// back 300 ms later: the write of the outcome fails, is tried again until
// it succeeds, and the message is recorded delivered after its first
// delivery, not delivered again when its lease expires.
func TestLostOutcomeIsRecordedBeforeTheLease(t *testing.T) {
	direct := outboxtest.Pool(t)
	proxy := faultproxy.Start(t, "127.0.0.1:5432")
	cfg, err := pgxpool.ParseConfig(testenv.PostgresDSN())
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(proxy.Addr())
	n, _ := strconv.Atoi(port)
	cfg.ConnConfig.Host, cfg.ConnConfig.Port = "127.0.0.1", uint16(n)
	p, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	mine := outboxtest.New(t, direct)
	o, err := outbox.New(p, mine.Table())
	if err != nil {
		t.Fatal(err)
	}
	testLostOutcome(t, mine, o, direct, proxy)
}

// testLostOutcome: o reaches its database through proxy, mine the same
// table directly (through direct). The proxy refuses connections just as
// the receiver accepts the delivery; the outcome is written once it heals,
// before the lease ends, so the message is delivered once.
func testLostOutcome(t *testing.T, mine, o *outbox.Outbox, direct outbox.Querier, proxy *faultproxy.Proxy) {
	var got atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if got.Add(1) == 1 {
			proxy.Refuse() // the relay's database is down with the answer on its way
			proxy.CutAll()
			time.AfterFunc(300*time.Millisecond, proxy.Heal)
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	id, err := o.Enqueue(context.Background(), direct, outbox.Message{URL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	outboxtest.Run(t, outbox.RelayOptions{Outbox: o, Lease: 3 * time.Second, PollInterval: 10 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
	outboxtest.Eventually(t, "delivered", func() bool { return state(t, mine, id).Status == outbox.Delivered })
	if s := state(t, mine, id); s.Deliveries != 1 || got.Load() != 1 {
		t.Fatalf("recorded after %d deliveries, the receiver got it %d times: want once, the lost outcome written before the lease ran out", s.Deliveries, got.Load())
	}
}

// The embedded migrations load and build the table relays use; down to 0
// drops it.
func TestMigrations(t *testing.T) {
	p := outboxtest.Pool(t)
	o := outboxtest.New(t, p)
	ctx := context.Background()
	if err := o.Migrate(ctx); err != nil { // again: nothing to do
		t.Fatal(err)
	}
	if _, err := o.Enqueue(ctx, p, outbox.Message{URL: "http://127.0.0.1:1/"}); err != nil {
		t.Fatal(err)
	}
	if err := o.MigrateDown(ctx, 0); err != nil {
		t.Fatal(err)
	}
	var exists bool
	p.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", o.Table()).Scan(&exists)
	if exists {
		t.Fatal("MigrateDown(0) left the table")
	}
	p.Exec(ctx, "DELETE FROM retryhttp_schema_versions WHERE name = $1", o.Table())
}

// A relay whose lease ran out before its delivery ended (a process paused
// past its lease: a GC pause, a stopped VM) reports that delivery's failure
// after another relay leased the message again. The late outcome must not
// touch the new lease: neither reschedule the message, which would send it
// a third time while the second delivery runs, nor mark it dead under it.
func TestLateOutcomeOfAnOldLease(t *testing.T) {
	for _, c := range []struct {
		name          string
		maxDeliveries int // 1: the late failure would be a death
	}{{"retry", 5}, {"dead", 1}} {
		t.Run(c.name, func(t *testing.T) {
			p := outboxtest.Pool(t)
			o := outboxtest.New(t, p)
			var mu sync.Mutex
			var sent []int
			release := map[int]chan struct{}{1: make(chan struct{}), 2: make(chan struct{})}
			slow := outbox.SenderFunc(func(_ context.Context, d outbox.Delivery) outbox.Result {
				mu.Lock()
				sent = append(sent, d.Deliveries)
				mu.Unlock()
				if ch, ok := release[d.Deliveries]; ok {
					<-ch // deaf to its context, as a paused process is
				}
				if d.Deliveries == 1 {
					return outbox.Result{Err: errors.New("the receiver flickered")}
				}
				return outbox.Result{}
			})
			sends := func() []int { mu.Lock(); defer mu.Unlock(); return slices.Clone(sent) }
			defer func() { // a failed test leaves no sender blocked
				for _, ch := range release {
					select {
					case <-ch:
					default:
						close(ch)
					}
				}
			}()
			id, err := o.Enqueue(context.Background(), p, outbox.Message{URL: "slow://receiver/orders"})
			if err != nil {
				t.Fatal(err)
			}
			backoff := queue.Backoff{Base: 10 * time.Millisecond, Max: 10 * time.Millisecond}
			senders := map[string]outbox.Sender{"slow": slow}
			const short = 300 * time.Millisecond
			// The old relay holds one delivery at a time: while its first
			// runs, it leases nothing more.
			outboxtest.Run(t, outbox.RelayOptions{Outbox: o, Lease: short, Batch: 1, PollInterval: 10 * time.Millisecond, MaxDeliveries: c.maxDeliveries, Backoff: backoff, Senders: senders})
			outboxtest.Eventually(t, "the first delivery", func() bool { return len(sends()) == 1 })
			time.Sleep(short + 100*time.Millisecond) // its lease runs out
			outboxtest.Run(t, outbox.RelayOptions{Outbox: o, Lease: time.Minute, PollInterval: 10 * time.Millisecond, MaxDeliveries: c.maxDeliveries, Backoff: backoff, Senders: senders})
			outboxtest.Eventually(t, "the second delivery, by the new relay", func() bool { return len(sends()) == 2 })
			close(release[1]) // the old delivery's failure arrives, late
			time.Sleep(300 * time.Millisecond)
			if got := sends(); len(got) != 2 {
				t.Fatalf("deliveries %v while the second still runs: the old lease's outcome rescheduled the message", got)
			}
			if s := state(t, o, id); s.Status != outbox.Pending {
				t.Fatalf("status %v while the second delivery runs, want pending", s.Status)
			}
			close(release[2])
			outboxtest.Eventually(t, "delivered", func() bool { return state(t, o, id).Status == outbox.Delivered })
			if s := state(t, o, id); s.Deliveries != 2 {
				t.Errorf("delivered after %d deliveries, want 2", s.Deliveries)
			}
		})
	}
}

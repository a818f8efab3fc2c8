package natsoutbox_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/retryhttp/retryhttp"
	"github.com/retryhttp/retryhttp/idempotency"
	"github.com/retryhttp/retryhttp/internal/testenv"
	"github.com/retryhttp/retryhttp/outbox"
	"github.com/retryhttp/retryhttp/outbox/natsoutbox"
	"github.com/retryhttp/retryhttp/queue/natsjs"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var quiet = slog.New(slog.DiscardHandler)

// connect reaches the tests' NATS with JetStream; without it the test is
// skipped loudly, and fails under CI=true.
func connect(t testing.TB) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect(testenv.NATSURL(), nats.Timeout(2*time.Second))
	if err != nil {
		testenv.Unreachable(t, "NATS", testenv.NATSURL(), err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// stream makes a stream of the test's own on one subject, deleted when
// the test ends.
func stream(t testing.TB, js jetstream.JetStream, window time.Duration) (string, jetstream.Stream) {
	t.Helper()
	name := "OUTBOX_" + strings.ReplaceAll(uuid.NewString(), "-", "")
	subject := strings.ToLower(name) + ".placed"
	s, err := js.CreateStream(context.Background(), jetstream.StreamConfig{Name: name, Subjects: []string{subject}, Duplicates: window})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { js.DeleteStream(context.Background(), name) })
	return subject, s
}

func db(t testing.TB) *pgxpool.Pool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	p, err := pgxpool.New(ctx, testenv.PostgresDSN())
	if err == nil {
		err = p.Ping(ctx)
	}
	if err != nil {
		testenv.Unreachable(t, "PostgreSQL", testenv.PostgresDSN(), err)
	}
	t.Cleanup(p.Close)
	return p
}

// newOutbox makes an outbox on a table of the test's own (or the one
// named), dropped after the test by whoever made it.
func newOutbox(t testing.TB, p *pgxpool.Pool, table string) *outbox.Outbox {
	t.Helper()
	mine := table == ""
	if mine {
		table = "outbox_" + strings.ReplaceAll(uuid.NewString(), "-", "")
	}
	o, err := outbox.New(p, table)
	if err != nil {
		t.Fatal(err)
	}
	if mine {
		if err := o.Migrate(context.Background()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			p.Exec(context.Background(), "DROP TABLE IF EXISTS "+table)
			p.Exec(context.Background(), "DELETE FROM retryhttp_schema_versions WHERE name = $1", table)
		})
	}
	return o
}

func run(t *testing.T, o outbox.RelayOptions) {
	t.Helper()
	o.Logger = quiet
	r, err := outbox.NewRelay(o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- r.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}

func pending(t testing.TB, p *pgxpool.Pool, o *outbox.Outbox) int {
	var n int
	if err := p.QueryRow(context.Background(), "SELECT count(*) FROM "+o.Table()+" WHERE status <> 'delivered'").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// inStream is how many times each Nats-Msg-Id is in the stream.
func inStream(t *testing.T, s jetstream.Stream) map[string]int {
	t.Helper()
	ctx := context.Background()
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]int{}
	for seq := info.State.FirstSeq; info.State.Msgs > 0 && seq <= info.State.LastSeq; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if err != nil {
			t.Fatal(err)
		}
		ids[m.Header.Get(jetstream.MsgIDHeader)]++
	}
	return ids
}

func enqueue(t *testing.T, p *pgxpool.Pool, o *outbox.Outbox, subject string, n int) map[string]bool {
	t.Helper()
	ids := map[string]bool{}
	for i := range n {
		id, err := o.Enqueue(context.Background(), p, outbox.Message{URL: natsoutbox.URL(subject), Body: fmt.Appendf(nil, "order %d", i),
			Header: map[string][]string{"Order": {fmt.Sprint(i)}}})
		if err != nil {
			t.Fatal(err)
		}
		ids[id] = true
	}
	return ids
}

func onceEach(t *testing.T, got map[string]int, want map[string]bool) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("the stream holds %d message IDs, want %d", len(got), len(want))
	}
	for id, n := range got {
		if !want[id] || n != 1 {
			t.Fatalf("message %s is in the stream %d times (enqueued: %v), want once", id, n, want[id])
		}
	}
}

// forgetful publishes each message, and on its first delivery reports a
// failure anyway: a relay that published and did not get to record it.
type forgetful struct {
	s    *natsoutbox.Sender
	mu   sync.Mutex
	seen map[string]bool
}

func (f *forgetful) Send(ctx context.Context, d outbox.Delivery) outbox.Result {
	res := f.s.Send(ctx, d)
	f.mu.Lock()
	defer f.mu.Unlock()
	if res.Err == nil && !f.seen[d.ID] {
		f.seen[d.ID] = true
		return outbox.Result{Err: errors.New("the relay lost the outcome")}
	}
	return res
}

// Every message reaches the stream once, with its ID as Nats-Msg-Id, its
// header and body, although every one of them is published twice: the
// stream's duplicate window drops the second copy and acknowledges it,
// and the relay records that as delivered.
func TestPublishedOncePerMessage(t *testing.T) {
	js := connect(t)
	p := db(t)
	o := newOutbox(t, p, "")
	subject, s := stream(t, js, time.Minute)
	want := enqueue(t, p, o, subject, 200)
	sender, err := natsoutbox.New(js)
	if err != nil {
		t.Fatal(err)
	}
	run(t, outbox.RelayOptions{Outbox: o, PollInterval: 10 * time.Millisecond,
		Senders: map[string]outbox.Sender{natsoutbox.Scheme: &forgetful{s: sender, seen: map[string]bool{}}},
		Policy:  retryhttp.Policy{BaseDelay: 10 * time.Millisecond, MaxDelay: 10 * time.Millisecond}})
	eventually(t, "every message delivered", func() bool { return pending(t, p, o) == 0 })
	onceEach(t, inStream(t, s), want)
	m, err := s.GetMsg(context.Background(), 1)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(m.Data), "order ") || m.Header.Get("Order") == "" {
		t.Errorf("the first message: header %v, body %q", m.Header, m.Data)
	}
}

// A relay killed (SIGKILL) between its publishes and their record leaves
// them to the next relay, which publishes them again when their lease
// expires: the stream still holds each once.
func TestRelayKilledAfterPublish(t *testing.T) {
	if os.Getenv("NATSOUTBOX_CHILD") != "" {
		t.Skip("in the child")
	}
	js := connect(t)
	p := db(t)
	o := newOutbox(t, p, "")
	subject, s := stream(t, js, time.Minute)
	want := enqueue(t, p, o, subject, 50)
	child := exec.Command(os.Args[0], "-test.run=^TestChildRelay$")
	child.Env = append(os.Environ(), "NATSOUTBOX_CHILD="+o.Table())
	child.Stderr = os.Stderr
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the child's publishes", func() bool { return len(inStream(t, s)) >= 10 })
	child.Process.Signal(syscall.SIGKILL)
	child.Wait()
	if n := pending(t, p, o); n != len(want) {
		t.Fatalf("%d messages pending after the kill, want all %d: the child recorded nothing", n, len(want))
	}
	sender, _ := natsoutbox.New(js)
	run(t, outbox.RelayOptions{Outbox: o, PollInterval: 20 * time.Millisecond, Lease: time.Second,
		Senders: map[string]outbox.Sender{natsoutbox.Scheme: sender}})
	eventually(t, "every message delivered", func() bool { return pending(t, p, o) == 0 })
	onceEach(t, inStream(t, s), want)
}

// TestChildRelay is the relay TestRelayKilledAfterPublish kills: it
// publishes, and then hangs before the relay can record anything.
func TestChildRelay(t *testing.T) {
	table := os.Getenv("NATSOUTBOX_CHILD")
	if table == "" {
		t.Skip("run by TestRelayKilledAfterPublish")
	}
	js := connect(t)
	o := newOutbox(t, db(t), table)
	sender, _ := natsoutbox.New(js)
	hang := outbox.SenderFunc(func(ctx context.Context, d outbox.Delivery) outbox.Result {
		sender.Send(ctx, d)
		select {} // killed here
	})
	r, err := outbox.NewRelay(outbox.RelayOptions{Outbox: o, Lease: time.Second, Logger: quiet,
		Senders: map[string]outbox.Sender{natsoutbox.Scheme: hang}})
	if err != nil {
		t.Fatal(err)
	}
	r.Run(context.Background())
}

// A message published again after the stream's duplicate window is
// stored twice; a consumer that runs each message once per key
// (queue/natsjs, keyed by Nats-Msg-Id) runs the second copy as a
// duplicate: one effect.
func TestDuplicateWindowOutlived(t *testing.T) {
	js := connect(t)
	subject, s := stream(t, js, 200*time.Millisecond)
	sender, _ := natsoutbox.New(js)
	u, _ := url.Parse(natsoutbox.URL(subject))
	d := outbox.Delivery{ID: uuid.NewString(), Method: "POST", URL: u, Body: []byte("charge order 7")}
	ctx := context.Background()
	for i, wait := range []time.Duration{0, 0, 400 * time.Millisecond} {
		time.Sleep(wait)
		if res := sender.Send(ctx, d); res.Err != nil {
			t.Fatalf("publish %d: %v", i+1, res.Err)
		}
	}
	if got := inStream(t, s)[d.ID]; got != 2 {
		t.Fatalf("the stream holds the message %d times, want 2: the second publish inside the window dropped, the third after it kept", got)
	}
	runner, err := idempotency.NewRunner(idempotency.RunnerOptions{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	effects := 0
	h, err := natsjs.Handler(natsjs.Options{Runner: runner, Logger: quiet}, func(ctx context.Context, msg jetstream.Msg) ([]byte, error) {
		mu.Lock()
		effects++
		mu.Unlock()
		return nil, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	info, _ := s.Info(ctx)
	cons, err := s.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: "fulfilment", AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		t.Fatal(err)
	}
	cc, err := cons.Consume(h)
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Stop()
	eventually(t, "both copies acknowledged", func() bool {
		ci, err := cons.Info(ctx)
		return err == nil && ci.AckFloor.Stream == info.State.LastSeq
	})
	mu.Lock()
	defer mu.Unlock()
	if effects != 1 {
		t.Fatalf("the handler ran %d times for one message published twice, want 1", effects)
	}
}

// A subject no stream takes is retried, the reason recorded; a URL that
// names no subject is dead at once.
func TestUndeliverable(t *testing.T) {
	js := connect(t)
	p := db(t)
	o := newOutbox(t, p, "")
	ctx := context.Background()
	noStream, _ := o.Enqueue(ctx, p, outbox.Message{URL: natsoutbox.URL("nobody.listens." + uuid.NewString())})
	noSubject, _ := o.Enqueue(ctx, p, outbox.Message{URL: natsoutbox.URL("orders.*")})
	sender, _ := natsoutbox.New(js)
	run(t, outbox.RelayOptions{Outbox: o, PollInterval: 10 * time.Millisecond, Senders: map[string]outbox.Sender{natsoutbox.Scheme: sender},
		Policy: retryhttp.Policy{MaxAttempts: 2, BaseDelay: 10 * time.Millisecond, MaxDelay: 10 * time.Millisecond}})
	eventually(t, "both dead", func() bool {
		a, _ := o.State(ctx, noStream)
		b, _ := o.State(ctx, noSubject)
		return a.Status == outbox.Dead && b.Status == outbox.Dead
	})
	if s, _ := o.State(ctx, noStream); s.Deliveries != 2 || !strings.Contains(s.LastError, "no stream takes subject") {
		t.Errorf("no stream: %+v, want dead after 2 deliveries with the reason", s)
	}
	if s, _ := o.State(ctx, noSubject); s.Deliveries != 1 || !strings.Contains(s.LastError, "names no subject") {
		t.Errorf("no subject: %+v, want dead after 1", s)
	}
	if _, err := natsoutbox.New(nil); err == nil {
		t.Error("New(nil) accepted")
	}
}

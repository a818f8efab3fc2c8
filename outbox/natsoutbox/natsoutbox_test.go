package natsoutbox_test

import (
	"context"
	"fmt"
	"net"
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

	"github.com/retryhttp/retryhttp/idempotency"
	"github.com/retryhttp/retryhttp/outbox"
	"github.com/retryhttp/retryhttp/outbox/internal/outboxtest"
	"github.com/retryhttp/retryhttp/outbox/natsoutbox"
	"github.com/retryhttp/retryhttp/queue"
	"github.com/retryhttp/retryhttp/queue/natsjs"
	"github.com/retryhttp/retryhttp/shared/natstest"
	"github.com/retryhttp/retryhttp/shared/testenv"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

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

// Every message reaches the stream once, with its ID as Nats-Msg-Id, its
// header and body, although every one of them is published twice: the
// stream's duplicate window drops the second copy and acknowledges it,
// and the relay records that as delivered.
func TestPublishedOncePerMessage(t *testing.T) {
	js := natstest.JetStream(t)
	p := outboxtest.Pool(t)
	o := outboxtest.New(t, p)
	subject, s := stream(t, js, time.Minute)
	want := enqueue(t, p, o, subject, 200)
	sender, err := natsoutbox.New(js)
	if err != nil {
		t.Fatal(err)
	}
	outboxtest.Run(t, outbox.RelayOptions{Outbox: o, PollInterval: 10 * time.Millisecond,
		Senders: map[string]outbox.Sender{natsoutbox.Scheme: outboxtest.Forgetful(sender)},
		Backoff: queue.Backoff{Base: 10 * time.Millisecond, Max: 10 * time.Millisecond}})
	outboxtest.Eventually(t, "every message delivered", func() bool { return outboxtest.Pending(t, p, o) == 0 })
	onceEach(t, inStream(t, s), want)
	m, err := s.GetMsg(context.Background(), 1)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(m.Data), "order ") || m.Header.Get("Order") == "" ||
		m.Header.Get("Idempotency-Key") != m.Header.Get(jetstream.MsgIDHeader) {
		t.Errorf("the first message: header %v, body %q; want its header, and its ID as Idempotency-Key (it was enqueued without one)", m.Header, m.Data)
	}
}

// A relay killed (SIGKILL) between its publishes and their record leaves
// them to the next relay, which publishes them again when their lease
// expires: the stream still holds each once.
func TestRelayKilledAfterPublish(t *testing.T) {
	if os.Getenv("NATSOUTBOX_CHILD") != "" {
		t.Skip("in the child")
	}
	js := natstest.JetStream(t)
	p := outboxtest.Pool(t)
	o := outboxtest.New(t, p)
	subject, s := stream(t, js, time.Minute)
	want := enqueue(t, p, o, subject, 50)
	child := exec.Command(os.Args[0], "-test.run=^TestChildRelay$")
	child.Env = append(os.Environ(), "NATSOUTBOX_CHILD="+o.Table())
	child.Stderr = os.Stderr
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	outboxtest.Eventually(t, "the child's publishes", func() bool { return len(inStream(t, s)) >= 10 })
	child.Process.Signal(syscall.SIGKILL)
	child.Wait()
	if n := outboxtest.Pending(t, p, o); n != len(want) {
		t.Fatalf("%d messages pending after the kill, want all %d: the child recorded nothing", n, len(want))
	}
	sender, _ := natsoutbox.New(js)
	outboxtest.Run(t, outbox.RelayOptions{Outbox: o, PollInterval: 20 * time.Millisecond, Lease: time.Second,
		Senders: map[string]outbox.Sender{natsoutbox.Scheme: sender}})
	outboxtest.Eventually(t, "every message delivered", func() bool { return outboxtest.Pending(t, p, o) == 0 })
	onceEach(t, inStream(t, s), want)
}

// TestChildRelay is the relay TestRelayKilledAfterPublish kills: it
// publishes, and then hangs before the relay can record anything.
func TestChildRelay(t *testing.T) {
	table := os.Getenv("NATSOUTBOX_CHILD")
	if table == "" {
		t.Skip("run by TestRelayKilledAfterPublish")
	}
	js := natstest.JetStream(t)
	o, err := outbox.New(outboxtest.Pool(t), table) // the parent's table, which the parent drops
	if err != nil {
		t.Fatal(err)
	}
	sender, _ := natsoutbox.New(js)
	hang := outbox.SenderFunc(func(ctx context.Context, d outbox.Delivery) outbox.Result {
		sender.Send(ctx, d)
		select {} // killed here
	})
	r, err := outbox.NewRelay(outbox.RelayOptions{Outbox: o, Lease: time.Second, Logger: outboxtest.Quiet,
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
	js := natstest.JetStream(t)
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
	runner, err := idempotency.NewRunner(idempotency.RunnerOptions{Logger: outboxtest.Quiet})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	effects := 0
	h, err := natsjs.Handler(natsjs.Options{Runner: runner, Logger: outboxtest.Quiet}, func(ctx context.Context, msg jetstream.Msg) ([]byte, error) {
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
	outboxtest.Eventually(t, "both copies acknowledged", func() bool {
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
	js := natstest.JetStream(t)
	p := outboxtest.Pool(t)
	o := outboxtest.New(t, p)
	ctx := context.Background()
	noStream, _ := o.Enqueue(ctx, p, outbox.Message{URL: natsoutbox.URL("nobody.listens." + uuid.NewString())})
	noSubject, _ := o.Enqueue(ctx, p, outbox.Message{URL: natsoutbox.URL("orders.*")})
	sender, _ := natsoutbox.New(js)
	outboxtest.Run(t, outbox.RelayOptions{Outbox: o, PollInterval: 10 * time.Millisecond, Senders: map[string]outbox.Sender{natsoutbox.Scheme: sender},
		MaxDeliveries: 2, Backoff: queue.Backoff{Base: 10 * time.Millisecond, Max: 10 * time.Millisecond}})
	outboxtest.Eventually(t, "both dead", func() bool {
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

// While the NATS server is down, a delivery fails for that reason, and
// the message's last error says so.
func TestServerDownIsSaid(t *testing.T) {
	if _, err := exec.LookPath("nats-server"); err != nil {
		testenv.Unreachable(t, "nats-server", "PATH", err)
	}
	port := freePort(t)
	srv := exec.Command("nats-server", "-a", "127.0.0.1", "-p", fmt.Sprint(port), "-js", "-sd", t.TempDir())
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Process.Kill(); srv.Wait() })
	addr := fmt.Sprintf("nats://127.0.0.1:%d", port)
	var nc *nats.Conn
	outboxtest.Eventually(t, "the test's nats-server", func() bool {
		var err error
		nc, err = nats.Connect(addr, nats.Timeout(time.Second), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
		return err == nil
	})
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateStream(context.Background(), jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.placed"}}); err != nil {
		t.Fatal(err)
	}
	sender, _ := natsoutbox.New(js)
	u, _ := url.Parse(natsoutbox.URL("orders.placed"))
	d := outbox.Delivery{ID: uuid.NewString(), Method: "POST", URL: u, Header: map[string][]string{"Content-Type": {"application/json"}}, Body: []byte("{}"), Deliveries: 1}
	if res := sender.Send(context.Background(), d); res.Err != nil {
		t.Fatalf("with the server up: %v", res.Err)
	}
	srv.Process.Signal(syscall.SIGKILL) // by pid: the test's own server
	srv.Wait()
	outboxtest.Eventually(t, "the client to see the server gone", func() bool { return !nc.IsConnected() })
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	res := sender.Send(ctx, d)
	if res.Err == nil || !strings.Contains(res.Err.Error(), "unreachable") || res.Final {
		t.Errorf("with the server down: %v (final %v), want a failure to retry that says the server is unreachable", res.Err, res.Final)
	}
}

func freePort(t *testing.T) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

package natsjs_test

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/retryhttp/retryhttp/idempotency"
	"github.com/retryhttp/retryhttp/queue"
	"github.com/retryhttp/retryhttp/queue/natsjs"
	"github.com/retryhttp/retryhttp/shared/testenv"
)

// ownNATS is a nats-server of the test's own, with JetStream on a file
// store in a directory of the test's, on a free port: killed (SIGKILL)
// and started again on the same port and store by the test, never the
// machine's.
type ownNATS struct {
	t    *testing.T
	bin  string
	port int
	dir  string
	cmd  *exec.Cmd
}

func startNATS(t *testing.T) *ownNATS {
	t.Helper()
	bin, err := exec.LookPath("nats-server")
	if err != nil {
		testenv.Unreachable(t, "nats-server", "PATH", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	n := &ownNATS{t: t, bin: bin, port: ln.Addr().(*net.TCPAddr).Port, dir: t.TempDir()}
	ln.Close()
	n.start()
	t.Cleanup(n.kill)
	return n
}

func (n *ownNATS) url() string { return "nats://127.0.0.1:" + strconv.Itoa(n.port) }

func (n *ownNATS) start() {
	n.t.Helper()
	n.cmd = exec.Command(n.bin, "-a", "127.0.0.1", "-p", strconv.Itoa(n.port), "-js", "-sd", n.dir)
	if err := n.cmd.Start(); err != nil {
		n.t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if c, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(n.port)); err == nil {
			c.Close()
			return
		}
		if time.Now().After(deadline) {
			n.t.Fatal("nats-server did not listen in 10 s")
		}
	}
}

func (n *ownNATS) kill() {
	if n.cmd != nil {
		n.cmd.Process.Kill()
		n.cmd.Wait()
		n.cmd = nil
	}
}

// 1,000 orders through a JetStream consumer while the server is killed
// with SIGKILL and started again twice, on its file store: the messages
// survive the restarts, the client reconnects, the deliveries in flight
// at each kill (their acks lost with the server) are redelivered, and
// each order's effect happens exactly once.
func TestBrokerKilledAndRestarted(t *testing.T) {
	srv := startNATS(t)
	nc, err := nats.Connect(srv.url(), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond),
		nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.placed"}, Storage: jetstream.FileStorage}); err != nil {
		t.Fatal(err)
	}
	cons, err := js.CreateOrUpdateConsumer(ctx, "ORDERS", jetstream.ConsumerConfig{Durable: "fulfilment", AckPolicy: jetstream.AckExplicitPolicy, AckWait: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	const orders = 1000
	for i := range orders {
		m := nats.NewMsg("orders.placed")
		m.Header.Set(jetstream.MsgIDHeader, fmt.Sprint("order-", i))
		m.Data = []byte(fmt.Sprint("order-", i))
		if _, err := js.PublishMsg(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	runner, err := idempotency.NewRunner(idempotency.RunnerOptions{Kind: "fulfilment", LockTimeout: 3 * time.Second, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	effects := map[string]int{}
	hooks := &redeliveries{}
	handler, err := natsjs.Handler(natsjs.Options{Runner: runner, Logger: quiet(), Hooks: []natsjs.Hook{hooks},
		Backoff: queue.Backoff{Base: 20 * time.Millisecond, Max: 100 * time.Millisecond},
	}, func(ctx context.Context, m jetstream.Msg) ([]byte, error) {
		time.Sleep(time.Millisecond) // the effect takes a moment: a kill lands mid-message
		mu.Lock()
		effects[string(m.Data())]++
		mu.Unlock()
		return nil, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	cc, err := cons.Consume(handler, jetstream.PullMaxMessages(50),
		jetstream.ConsumeErrHandler(func(jetstream.ConsumeContext, error) {})) // the kills' broken connections, expected
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Stop()
	done := func() int { mu.Lock(); defer mu.Unlock(); return len(effects) }
	for _, at := range []int{orders / 3, 2 * orders / 3} {
		for deadline := time.Now().Add(20 * time.Second); done() < at; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%d orders handled before the kill, want %d", done(), at)
			}
		}
		srv.kill() // SIGKILL, with deliveries in flight
		time.Sleep(200 * time.Millisecond)
		srv.start()
	}
	for deadline := time.Now().Add(60 * time.Second); done() < orders; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d orders handled after the restarts", done(), orders)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for k, n := range effects {
		if n != 1 {
			t.Errorf("%s: %d effects, want 1", k, n)
		}
	}
	t.Logf("%d orders, each once; %d deliveries marked as redeliveries; %d duplicates acknowledged unrun (a restart may forget what was acked)", orders, hooks.redelivered.Load(), hooks.duplicates.Load())
}

// redeliveries counts the deliveries that were not a message's first.
type redeliveries struct{ redelivered, duplicates atomic.Int64 }

func (r *redeliveries) OnEvent(_ context.Context, e natsjs.Event) {
	if e.Attempt > 1 {
		r.redelivered.Add(1)
	}
	if e.Kind == queue.EventDuplicate {
		r.duplicates.Add(1)
	}
}

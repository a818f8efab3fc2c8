// Package outboxtest holds what the tests of the outbox and of its broker
// senders share: an outbox on a table of the test's own, a relay that runs
// until the test ends, waiting for a condition, and the tests' PostgreSQL.
package outboxtest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/retryhttp/retryhttp/outbox"
	"github.com/retryhttp/retryhttp/shared/pgtest"
)

// Pool connects to the tests' PostgreSQL: pgtest.Pool.
func Pool(t testing.TB) *pgxpool.Pool { return pgtest.Pool(t) }

// Quiet is the relays' logger in tests.
var Quiet = slog.New(slog.DiscardHandler)

// New makes an outbox on a fresh table, dropped when the test ends.
func New(t testing.TB, p *pgxpool.Pool) *outbox.Outbox {
	t.Helper()
	table := "outbox_" + strings.ReplaceAll(uuid.NewString(), "-", "")
	o, err := outbox.New(p, table)
	if err != nil {
		t.Fatal(err)
	}
	if err := o.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.Exec(context.Background(), "DROP TABLE IF EXISTS "+table)
		p.Exec(context.Background(), "DELETE FROM retryhttp_schema_versions WHERE name = $1", table)
	})
	return o
}

// Run starts a relay until the test ends (with Quiet unless o has a
// Logger), and fails the test if it then returns anything but
// context.Canceled.
func Run(t testing.TB, o outbox.RelayOptions) {
	t.Helper()
	if o.Logger == nil {
		o.Logger = Quiet
	}
	r, err := outbox.NewRelay(o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- r.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("Run returned %v, want context.Canceled", err)
		}
	})
}

// Eventually polls cond for up to 20 s.
func Eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}

// Pending is how many of o's messages are not delivered (pending or dead).
func Pending(t testing.TB, p *pgxpool.Pool, o *outbox.Outbox) int {
	t.Helper()
	var n int
	if err := p.QueryRow(context.Background(), "SELECT count(*) FROM "+o.Table()+" WHERE status <> 'delivered'").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// Forgetful sends each message through s, and on its first delivery that
// succeeds reports a failure anyway: a relay that delivered and did not
// get to record it, so the message is delivered again.
func Forgetful(s outbox.Sender) outbox.Sender { return &forgetful{s: s, seen: map[string]bool{}} }

type forgetful struct {
	s    outbox.Sender
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

// Drain commits a backlog of n messages to url in o while no relay runs,
// then runs relays relays with senders until drained reports the backlog
// arrived (polled every 2 ms, for up to a minute), and returns the
// messages per second. The relays are stopped before it returns.
func Drain(b *testing.B, p *pgxpool.Pool, o *outbox.Outbox, url string, n, relays int, senders map[string]outbox.Sender, drained func() bool) float64 {
	b.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	if _, err := p.Exec(ctx, `INSERT INTO `+o.Table()+` (id, method, url, body)
SELECT gen_random_uuid()::text, 'POST', $1, '{"kind":"order.paid"}'::bytea FROM generate_series(1, $2)`, url, n); err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	for range relays {
		r, err := outbox.NewRelay(outbox.RelayOptions{Outbox: o, Logger: Quiet, Senders: senders})
		if err != nil {
			b.Fatal(err)
		}
		wg.Go(func() { r.Run(ctx) })
	}
	for deadline := time.Now().Add(time.Minute); !drained(); time.Sleep(2 * time.Millisecond) {
		if time.Now().After(deadline) {
			b.Fatal("backlog not drained")
		}
	}
	return float64(n) / time.Since(start).Seconds()
}

// Keyed is a message's header and the Idempotency-Key it must be
// delivered with: Key, or the message's ID when Key is "".
type Keyed struct {
	Header http.Header
	Key    string
}

// KeyFamily is n headers cycling through the ways a message carries a key
// or none: no header, a header without a key, an empty key, its own key
// under the canonical name, a lower-case name and the X- name alone. Each
// own key is unique to the call.
func KeyFamily(n int) []Keyed {
	run := uuid.NewString()[:8]
	out := make([]Keyed, n)
	for i := range out {
		own := fmt.Sprintf("own-%s-%d", run, i)
		switch i % 6 {
		case 0:
			out[i] = Keyed{}
		case 1:
			out[i] = Keyed{Header: http.Header{"Content-Type": {"text/plain"}}}
		case 2:
			out[i] = Keyed{Header: http.Header{"Idempotency-Key": {""}, "X-Order": {fmt.Sprint(i)}}}
		case 3:
			out[i] = Keyed{Header: http.Header{"Idempotency-Key": {own}}, Key: own}
		case 4:
			out[i] = Keyed{Header: http.Header{"idempotency-key": {own}}, Key: own}
		case 5:
			out[i] = Keyed{Header: http.Header{"X-Idempotency-Key": {own}}, Key: own}
		}
	}
	return out
}

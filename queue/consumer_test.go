package queue_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retryhttp/retryhttp/idempotency"
	"github.com/retryhttp/retryhttp/queue"
)

// delivery is a broker's delivery as the tests script it: the message is
// its key, and it records how it was settled.
type delivery struct {
	key       string
	n         int
	counted   bool
	settleErr error

	mu       sync.Mutex
	settled  []string
	renewals int
	stopped  bool // settled: a renewal after it is a bug
}

func (d *delivery) Message() string           { return d.key }
func (d *delivery) Attempt() (int, bool)      { return d.n, d.counted }
func (d *delivery) LogAttrs() []slog.Attr     { return []slog.Attr{slog.String("message", d.key)} }
func (d *delivery) Ack(context.Context) error { return d.settle("ack") }
func (d *delivery) End(_ context.Context, err error) error {
	return d.settle("end: " + err.Error())
}
func (d *delivery) Retry(_ context.Context, wait time.Duration) error {
	if wait == 0 {
		return d.settle("retry now")
	}
	return d.settle("retry later")
}

func (d *delivery) Renew(context.Context) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.stopped {
		panic("renewed after the outcome")
	}
	d.renewals++
}

func (d *delivery) settle(how string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.stopped = true
	d.settled = append(d.settled, how)
	return d.settleErr
}

func keyOf(m string) (string, error) {
	if m == "" {
		return "", errors.New("no key header")
	}
	return m, nil
}

func newCore(t *testing.T, runner *idempotency.Runner, log *bytes.Buffer, runPast bool, h func(context.Context, string) ([]byte, error)) *queue.Core[string] {
	t.Helper()
	c, err := queue.NewCore(queue.Config[string]{Broker: "test", Runner: runner, Key: keyOf, MaxAttempts: 3, RunPast: runPast,
		Backoff: queue.Backoff{Base: time.Second, Max: time.Second, Jitter: 3}, // JitterNone: a wait of exactly 1 s
		Logger:  slog.New(slog.NewTextHandler(log, nil)), Handler: h})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func memoryRunner(t *testing.T) *idempotency.Runner {
	t.Helper()
	r, err := idempotency.NewRunner(idempotency.RunnerOptions{Kind: "test", Logger: slog.New(slog.DiscardHandler),
		LockTimeout: time.Minute, MaxWait: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// Process applies the package doc's rules, in their order, whatever the
// broker: each case is one delivery of a message and how it was settled.
func TestProcess(t *testing.T) {
	fail := errors.New("flicker")
	cases := []struct {
		name     string
		d        *delivery
		handler  error // what the handler returns; nil: success
		panics   bool
		done     bool // the key has run before
		inFlight bool // the key is running elsewhere
		stopping bool // the consumer's context has ended
		runPast  bool // Config.RunPast
		kind     queue.EventKind
		settled  string
		ran      bool
	}{
		{name: "success", d: &delivery{key: "k", n: 1, counted: true}, kind: queue.EventProcessed, settled: "ack", ran: true},
		{name: "duplicate", d: &delivery{key: "k", n: 1, counted: true}, done: true, kind: queue.EventDuplicate, settled: "ack"},
		{name: "no key", d: &delivery{key: "", n: 1, counted: true}, kind: queue.EventDead, settled: "end: test: no key: no key header"},
		{name: "failure below MaxAttempts", d: &delivery{key: "k", n: 2, counted: true}, handler: fail, kind: queue.EventFailed, settled: "retry later", ran: true},
		{name: "failure at MaxAttempts", d: &delivery{key: "k", n: 3, counted: true}, handler: fail, kind: queue.EventDead, settled: "end: flicker", ran: true},
		{name: "failure at MaxAttempts, uncounted", d: &delivery{key: "k", n: 3}, handler: fail, kind: queue.EventFailed, settled: "retry later", ran: true},
		{name: "failure past MaxAttempts, uncounted", d: &delivery{key: "k", n: 9}, handler: fail, kind: queue.EventFailed, settled: "retry later", ran: true},
		{name: "permanent on the first", d: &delivery{key: "k", n: 1, counted: true}, handler: queue.Permanent(fail), kind: queue.EventDead, settled: "end: flicker", ran: true},
		{name: "panic", d: &delivery{key: "k", n: 1, counted: true}, panics: true, kind: queue.EventFailed, settled: "retry later", ran: true},
		{name: "panic at MaxAttempts", d: &delivery{key: "k", n: 3, counted: true}, panics: true, kind: queue.EventDead, settled: "end: queue: the handler panicked: boom", ran: true},
		{name: "past MaxAttempts", d: &delivery{key: "k", n: 4, counted: true}, kind: queue.EventDead, settled: "end: test: attempt 4 is past MaxAttempts 3: not run"},
		{name: "past MaxAttempts, run past", d: &delivery{key: "k", n: 4, counted: true}, runPast: true, kind: queue.EventProcessed, settled: "ack", ran: true},
		{name: "past MaxAttempts, run past, failing", d: &delivery{key: "k", n: 4, counted: true}, runPast: true, handler: fail, kind: queue.EventDead, settled: "end: flicker", ran: true},
		{name: "past MaxAttempts, the key done", d: &delivery{key: "k", n: 4, counted: true}, done: true, kind: queue.EventDuplicate, settled: "ack"},
		{name: "in flight at MaxAttempts", d: &delivery{key: "k", n: 3, counted: true}, inFlight: true, kind: queue.EventFailed, settled: "retry later"},
		{name: "in flight past MaxAttempts", d: &delivery{key: "k", n: 7, counted: true}, inFlight: true, kind: queue.EventFailed, settled: "retry later"},
		{name: "stopping at MaxAttempts", d: &delivery{key: "k", n: 3, counted: true}, stopping: true, kind: queue.EventFailed, settled: "retry now", ran: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			runner := memoryRunner(t)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tc.done {
				if _, _, err := runner.Do(ctx, "k", func(context.Context) ([]byte, error) { return []byte("x"), nil }); err != nil {
					t.Fatal(err)
				}
			}
			if tc.inFlight {
				release := make(chan struct{})
				started := make(chan struct{})
				var wg sync.WaitGroup
				defer wg.Wait()
				defer close(release)
				wg.Go(func() {
					runner.Do(context.Background(), "k", func(context.Context) ([]byte, error) { close(started); <-release; return nil, nil })
				})
				<-started
			}
			var ran atomic.Bool
			var log bytes.Buffer
			c := newCore(t, runner, &log, tc.runPast, func(context.Context, string) ([]byte, error) {
				ran.Store(true)
				if tc.stopping {
					cancel()
					return nil, context.Canceled
				}
				if tc.panics {
					panic("boom")
				}
				return []byte("shipped"), tc.handler
			})
			e := c.Process(ctx, tc.d)
			if e.Kind != tc.kind || ran.Load() != tc.ran || len(tc.d.settled) != 1 || tc.d.settled[0] != tc.settled {
				t.Errorf("%v, handler ran %v, settled %q; want %v, ran %v, settled %q", e.Kind, ran.Load(), tc.d.settled, tc.kind, tc.ran, tc.settled)
			}
			if e.Attempt != tc.d.n || e.Message != tc.d.key || e.Key != tc.d.key {
				t.Errorf("event %+v does not name the delivery", e)
			}
			if tc.inFlight && !errors.Is(e.Err, idempotency.ErrInFlight) {
				t.Errorf("Err = %v, want ErrInFlight", e.Err)
			}
			wantWait := map[string]time.Duration{"retry later": time.Second}[tc.settled]
			if e.Wait != wantWait {
				t.Errorf("Wait = %v, want %v", e.Wait, wantWait)
			}
			if (e.Err == nil) != (tc.kind == queue.EventProcessed || tc.kind == queue.EventDuplicate) {
				t.Errorf("Err = %v for a %v", e.Err, e.Kind)
			}
			if tc.panics && !strings.Contains(log.String(), "stack=") {
				t.Errorf("the log of a panic has no stack:\n%s", log.String())
			}
		})
	}
}

// Every outcome reaches every hook once, with the broker's settling error,
// which is logged.
func TestProcessTellsHooksAndSettleErrors(t *testing.T) {
	var got []queue.Event[string]
	var log bytes.Buffer
	c, err := queue.NewCore(queue.Config[string]{Broker: "test", Runner: memoryRunner(t), Key: keyOf,
		Logger:  slog.New(slog.NewTextHandler(&log, nil)),
		Hooks:   []queue.Hook[string]{queue.HookFunc[string](func(_ context.Context, e queue.Event[string]) { got = append(got, e) })},
		Handler: func(context.Context, string) ([]byte, error) { return nil, nil }})
	if err != nil {
		t.Fatal(err)
	}
	lost := errors.New("connection reset")
	c.Process(context.Background(), &delivery{key: "k", n: 1, counted: true, settleErr: lost})
	c.Process(context.Background(), &delivery{key: "", n: 1, counted: true})
	if len(got) != 2 || got[0].Kind != queue.EventProcessed || got[0].SettleErr != lost || got[1].Kind != queue.EventDead || got[1].SettleErr != nil {
		t.Fatalf("events %+v", got)
	}
	if !strings.Contains(log.String(), "settling the message failed") || !strings.Contains(log.String(), "connection reset") {
		t.Errorf("the settling error is not logged:\n%s", log.String())
	}
}

// A message that runs longer than the renewal interval is renewed while
// it runs, and never after its outcome.
func TestProcessRenews(t *testing.T) {
	for _, every := range []time.Duration{0, time.Millisecond} {
		t.Run(fmt.Sprint(every), func(t *testing.T) {
			c, err := queue.NewCore(queue.Config[string]{Broker: "test", Runner: memoryRunner(t), Key: keyOf, RenewEvery: every,
				Logger:  slog.New(slog.DiscardHandler),
				Handler: func(context.Context, string) ([]byte, error) { time.Sleep(30 * time.Millisecond); return nil, nil }})
			if err != nil {
				t.Fatal(err)
			}
			d := &delivery{key: "k", n: 1, counted: true}
			c.Process(context.Background(), d)
			d.mu.Lock()
			defer d.mu.Unlock()
			if (d.renewals > 0) != (every > 0) {
				t.Errorf("%d renewals every %v", d.renewals, every)
			}
		})
	}
}

// The settings every consumer shares are checked the same way.
func TestNewCoreRefusesBadConfig(t *testing.T) {
	h := func(context.Context, string) ([]byte, error) { return nil, nil }
	runner := memoryRunner(t)
	for name, c := range map[string]queue.Config[string]{
		"nil Runner":        {Key: keyOf, Handler: h},
		"nil handler":       {Runner: runner, Key: keyOf},
		"nil Key":           {Runner: runner, Handler: h},
		"negative attempts": {Runner: runner, Key: keyOf, Handler: h, MaxAttempts: -1},
		"negative renewal":  {Runner: runner, Key: keyOf, Handler: h, RenewEvery: -time.Second},
		"bad Backoff":       {Runner: runner, Key: keyOf, Handler: h, Backoff: queue.Backoff{Base: -1}},
	} {
		c.Broker = "kafka"
		if _, err := queue.NewCore(c); err == nil || !strings.HasPrefix(err.Error(), "kafka: ") {
			t.Errorf("%s: %v", name, err)
		}
	}
}

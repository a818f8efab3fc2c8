package overload_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/retryhttp/retryhttp/overload"
)

// recorder is a Hook that keeps the events it is told.
type recorder struct {
	mu     sync.Mutex
	events []overload.Event
}

func (r *recorder) OnEvent(_ context.Context, e overload.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
}

func (r *recorder) kinds(k overload.EventKind) []overload.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []overload.Event
	for _, e := range r.events {
		if e.Kind == k {
			out = append(out, e)
		}
	}
	return out
}

// Without a queue, a call over the limit is refused at once with
// ErrLimited, and a freed slot admits the next.
func TestLimitRefusesOverTheLimit(t *testing.T) {
	rec := &recorder{}
	l, err := overload.NewLimiter(overload.Options{Initial: 2, Name: "test", Hooks: []overload.Hook{rec}})
	if err != nil {
		t.Fatal(err)
	}
	lim := l.For("https://a")
	ctx := context.Background()
	p1, err1 := lim.Acquire(ctx)
	_, err2 := lim.Acquire(ctx)
	if err1 != nil || err2 != nil {
		t.Fatalf("the first two calls under a limit of 2: %v, %v", err1, err2)
	}
	if _, err := lim.Acquire(ctx); !errors.Is(err, overload.ErrLimited) {
		t.Fatalf("a third call: %v, want ErrLimited", err)
	}
	if _, ok := lim.TryAcquire(ctx); ok {
		t.Fatal("TryAcquire admitted a call over the limit")
	}
	refused := rec.kinds(overload.EventRefused)
	if len(refused) != 2 || refused[0].Key != "https://a" || refused[0].Name != "test" || refused[0].Limit != 2 || refused[0].InFlight != 2 {
		t.Fatalf("refusal events: %+v", refused)
	}
	p1.Cancel()
	if _, err := lim.Acquire(ctx); err != nil {
		t.Fatalf("after a slot was freed: %v", err)
	}
	if limit, inflight := lim.Current(); limit != 2 || inflight != 2 {
		t.Fatalf("Current: limit %d, in flight %d; want 2, 2", limit, inflight)
	}
	if other := l.For("https://b"); other == lim {
		t.Fatal("two keys share a Limit")
	}
}

// With a queue, a caller waits for a freed slot, in order; one past the
// queue is refused; MaxWait and the context bound the wait.
func TestLimitQueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, err := overload.NewLimiter(overload.Options{Initial: 1, Max: 1, Queue: 2, MaxWait: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		lim := l.For("k")
		ctx := context.Background()
		held, err := lim.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var order []int
		var mu sync.Mutex
		var wg sync.WaitGroup
		for i := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				p, err := lim.Acquire(ctx)
				if err != nil {
					t.Errorf("waiter %d: %v", i, err)
					return
				}
				mu.Lock()
				order = append(order, i)
				mu.Unlock()
				time.Sleep(100 * time.Millisecond)
				p.Done(false)
			}()
			synctest.Wait() // the waiters queue in order
		}
		start := time.Now()
		if _, err := lim.Acquire(ctx); !errors.Is(err, overload.ErrLimited) {
			t.Fatalf("a third waiter, past the queue of 2: %v", err)
		}
		if time.Since(start) != 0 {
			t.Fatal("the refusal past the queue waited")
		}
		time.Sleep(50 * time.Millisecond)
		held.Done(false)
		wg.Wait()
		if len(order) != 2 || order[0] != 0 || order[1] != 1 {
			t.Fatalf("waiters admitted in order %v, want [0 1]", order)
		}

		held, _ = lim.Acquire(ctx)
		start = time.Now()
		if _, err := lim.Acquire(ctx); !errors.Is(err, overload.ErrLimited) || time.Since(start) != time.Second {
			t.Fatalf("a wait past MaxWait: %v after %v, want ErrLimited after 1s", err, time.Since(start))
		}
		dctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		defer cancel()
		start = time.Now()
		if _, err := lim.Acquire(dctx); !errors.Is(err, context.DeadlineExceeded) || time.Since(start) != 300*time.Millisecond {
			t.Fatalf("a wait past the deadline: %v after %v, want DeadlineExceeded after 300ms", err, time.Since(start))
		}
		if _, inflight := lim.Current(); inflight != 1 {
			t.Fatalf("in flight after the waits gave up: %d, want 1", inflight)
		}
		held.Done(false)
		if _, inflight := lim.Current(); inflight != 0 {
			t.Fatalf("in flight at the end: %d, want 0", inflight)
		}
	})
}

// Under concurrent use the calls in flight never pass the limit, and
// every slot comes back.
func TestLimitConcurrent(t *testing.T) {
	l, err := overload.NewLimiter(overload.Options{Initial: 4, Max: 4, Queue: 64})
	if err != nil {
		t.Fatal(err)
	}
	lim := l.For("k")
	var mu sync.Mutex
	inflight, peak := 0, 0
	var wg sync.WaitGroup
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 50 {
				p, err := lim.Acquire(context.Background())
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				inflight++
				peak = max(peak, inflight)
				mu.Unlock()
				mu.Lock()
				inflight--
				mu.Unlock()
				p.Done(false)
			}
		}()
	}
	wg.Wait()
	limit, now := lim.Current()
	if peak > 4 || now != 0 || limit > 4 {
		t.Fatalf("peak in flight %d (limit 4), %d in flight at the end, limit %d", peak, now, limit)
	}
}

// The limit moves with the latency the permits report, and each change is
// an event.
func TestLimitLearnsFromPermits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{}
		l := &overload.Limiter{}
		l2, _ := overload.NewLimiter(overload.Options{Hooks: []overload.Hook{rec}})
		for _, l := range []*overload.Limiter{l, l2} {
			lim := l.For("k")
			// 20 at a time, each taking 10ms, then 40ms: the limit grows,
			// then falls.
			round := func(took time.Duration) {
				limit, _ := lim.Current()
				var ps []overload.Permit
				for range limit {
					p, err := lim.Acquire(context.Background())
					if err != nil {
						t.Fatal(err)
					}
					ps = append(ps, p)
				}
				time.Sleep(took)
				for _, p := range ps {
					p.Done(false)
				}
			}
			for range 20 {
				round(10 * time.Millisecond)
			}
			grown, _ := lim.Current()
			if grown <= overload.DefaultInitial {
				t.Fatalf("steady 10ms latency with the limit in use: limit %d, want above %d", grown, overload.DefaultInitial)
			}
			for range 5 {
				round(40 * time.Millisecond)
			}
			if fallen, _ := lim.Current(); fallen >= grown*3/4 {
				t.Fatalf("latency quadrupled: limit %d, want well below %d", fallen, grown)
			}
		}
		if len(rec.kinds(overload.EventLimit)) == 0 {
			t.Fatal("no EventLimit as the limit moved")
		}
	})
}

func TestOptionsValidated(t *testing.T) {
	for _, tc := range []struct {
		opts overload.Options
		want string
	}{
		{overload.Options{Min: -1}, "Min"},
		{overload.Options{Min: 10, Max: 5}, "above Max"},
		{overload.Options{Tolerance: 0.5}, "Tolerance"},
		{overload.Options{Queue: -1}, "Queue"},
		{overload.Options{MaxWait: -time.Second}, "MaxWait"},
	} {
		_, err := overload.NewLimiter(tc.opts)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "overload: NewLimiter") {
			t.Errorf("%+v: %v, want an error naming %s", tc.opts, err, tc.want)
		}
	}
}

// Past MaxKeys, a key with nothing in flight is forgotten.
func TestLimiterBoundedKeys(t *testing.T) {
	l, _ := overload.NewLimiter(overload.Options{MaxKeys: 2})
	a := l.For("a")
	busy, _ := a.Acquire(context.Background())
	l.For("b")
	c := l.For("c") // forgets b, idle; a is busy
	if l.For("a") != a {
		t.Fatal("a key with a call in flight was forgotten")
	}
	busy.Done(false)
	b := l.For("b") // b again: c or a, both idle now, is forgotten
	if b.Forgotten() || l.For("b") != b {
		t.Fatal("the Limit just made for b reports itself forgotten, or is not the one For returns")
	}
	if a.Forgotten() == c.Forgotten() {
		t.Fatalf("room was made for b: forgotten a %v, c %v; want exactly one", a.Forgotten(), c.Forgotten())
	}
}

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

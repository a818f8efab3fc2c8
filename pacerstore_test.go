package retryhttp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// memStore is a PacerStore in memory, as several processes would share
// one in Redis. With conflicts, every Update calls f a second time, as a
// store does when another process changed the state meanwhile: a Pacer
// whose f did more than return a state would then count twice.
type memStore struct {
	conflicts bool

	mu     sync.Mutex
	states map[string][]byte
}

func (m *memStore) Update(_ context.Context, key string, f func([]byte) []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.states == nil {
		m.states = map[string][]byte{}
	}
	old := m.states[key]
	if m.conflicts {
		f(bytes.Clone(old))
	}
	m.states[key] = f(bytes.Clone(old))
	return nil
}

// Four processes on one API key, each with its own Pacer: through one
// Store they keep within the quota as one process does; each on its own,
// the others' requests take what each thinks is left. Varied over
// quotas, dialects, and a store that calls f again.
func TestPacerSharedThroughStore(t *testing.T) {
	for _, dialect := range []string{"github", "ietf", "draft", "openai"} {
		for _, q := range []struct {
			n      int
			window time.Duration
		}{{60, time.Second}, {100, 10 * time.Second}, {600, time.Minute}} {
			for _, conflicts := range []bool{false, true} {
				name := fmt.Sprintf("%s/%d per %v/conflicts=%v", dialect, q.n, q.window, conflicts)
				t.Run(name, func(t *testing.T) {
					store := &memStore{conflicts: conflicts}
					var fleet, alone []*Pacer
					for range 4 {
						fleet = append(fleet, &Pacer{MaxWait: q.window + time.Second, Store: store})
						alone = append(alone, &Pacer{MaxWait: q.window + time.Second})
					}
					const windows = 4
					quota := int64(q.n * windows)
					aServed, aRejected, _ := offerFleet(t, &quotaServer{n: q.n, window: q.window, dialect: dialect}, alone, 3, windows)
					served, rejected, paced := offerFleet(t, &quotaServer{n: q.n, window: q.window, dialect: dialect}, fleet, 3, windows)
					t.Logf("%s: 4 processes, each its own Pacer: %d served, %d 429s (%.1f%%); one Store: %d served (%.0f%% of the quota), %d 429s (%.2f%%), %d refused unsent",
						name, aServed, aRejected, 100*float64(aRejected)/float64(aServed+aRejected),
						served, 100*float64(served)/float64(quota), rejected, 100*float64(rejected)/float64(served+rejected), paced)
					// Alone, each process learns the others' use only from
					// its responses: some 429s, but no storm of them (a
					// reset rounded down once sent every waiting request
					// as a probe, 44-64% with OpenAI's headers).
					if aRejected*10 > aServed+aRejected {
						t.Errorf("each process on its own: %d 429s of %d sent: more than 10%%", aRejected, aServed+aRejected)
					}
					if rejected*100 > served+rejected {
						t.Errorf("%d 429s of %d sent: more than 1%%", rejected, served+rejected)
					}
					if served*100 < quota*95 {
						t.Errorf("%d served of a quota of %d: under 95%%", served, quota)
					}
				})
			}
		}
	}
}

// failingStore fails every Update, as a Redis that is down does.
type failingStore struct{ calls atomic.Int64 }

func (f *failingStore) Update(context.Context, string, func([]byte) []byte) error {
	f.calls.Add(1)
	return errors.New("connection refused")
}

// garbageStore holds what no Pacer wrote: another version's state.
type garbageStore struct{ memStore }

func (g *garbageStore) Update(ctx context.Context, key string, f func([]byte) []byte) error {
	return g.memStore.Update(ctx, key, func([]byte) []byte { return f([]byte("not a window")) })
}

// A Store that fails leaves the requests unpaced, never refused nor
// held, and is logged once; one that holds bytes no Pacer wrote is read
// as knowing nothing.
func TestPacerStoreFailure(t *testing.T) {
	for _, tc := range []struct {
		name  string
		store PacerStore
		logs  int
	}{{"failing", &failingStore{}, 1}, {"garbage", &garbageStore{}, 0}} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var logged strings.Builder
				p := &Pacer{Store: tc.store, Logger: slog.New(slog.NewTextHandler(&logged, nil))}
				s := &quotaServer{n: 5, window: time.Minute, dialect: "github", start: time.Now()}
				client := &http.Client{Transport: &Transport{Base: handlerBase{s}, Pacer: p, Policy: Policy{MaxAttempts: 1}, Logger: slog.New(slog.DiscardHandler)}}
				start := time.Now()
				for range 10 {
					resp, err := client.Get("http://api.test/items")
					if err != nil {
						t.Fatalf("a request failed: %v", err)
					}
					resp.Body.Close()
				}
				if d := time.Since(start); d > 5*2*time.Millisecond { // the server's own time for the 5 it serves
					t.Fatalf("the requests were held %v", d)
				}
				if s.served.Load() != 5 || s.rejected.Load() != 5 {
					t.Fatalf("%d served, %d 429s: want all 10 sent, unpaced", s.served.Load(), s.rejected.Load())
				}
				if n := strings.Count(logged.String(), "Store failed"); n != tc.logs {
					t.Fatalf("the Store's failure logged %d times, want %d:\n%s", n, tc.logs, logged.String())
				}
				if f, ok := tc.store.(*failingStore); ok && f.calls.Load() == 0 {
					t.Fatal("the Store was never asked")
				}
			})
		})
	}
}

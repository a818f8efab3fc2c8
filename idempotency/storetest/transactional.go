package storetest

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/retryhttp/retryhttp/idempotency"
)

// TxEnv is what the transactional scenarios need of a TxStore: the store,
// empty as NewStore's, and a table of charges of the test's own beside it.
type TxEnv struct {
	Store idempotency.TxStore
	// Charge writes one charge through the transaction of the request r
	// is serving (the store's Tx(r.Context())) and returns its ID.
	Charge func(r *http.Request) (int64, error)
	// Charges counts the charges committed.
	Charges func() int
}

// RunTransactional runs the scenarios of the middleware's transactional
// mode on a TxStore: the handler's charge and its stored response commit
// together, a 503, a panic or a rollback leaves neither and frees the key,
// and a request whose claim expired under it cannot commit.
func RunTransactional(t *testing.T, newEnv func(t *testing.T) TxEnv) {
	for _, tc := range []struct {
		name    string
		script  []string
		codes   []int
		charges int
	}{
		{"effect and response commit together", []string{"ok"}, []int{201, 201, 201, 201, 201}, 1},
		{"a 503 rolls the effect back and frees the key", []string{"503", "ok"}, []int{503, 201, 201}, 1},
		{"a panic rolls back and frees the key", []string{"panic", "ok"}, []int{500, 201}, 1},
		{"only the 503 runs: nothing committed", []string{"503"}, []int{503, 503}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := newEnv(t)
			url := txServer(t, env.Store, &chargeHandler{charge: env.Charge, script: tc.script}, 0)
			var first string
			for i, want := range tc.codes {
				code, body := postKey(t, url, "tx-key")
				if code != want {
					t.Fatalf("request %d: %d %s, want %d", i+1, code, body, want)
				}
				if code == 201 && first == "" {
					first = body
				} else if code == 201 && body != first {
					t.Fatalf("request %d: %s, want the replay of %s", i+1, body, first)
				}
			}
			if n := env.Charges(); n != tc.charges {
				t.Fatalf("%d charges, want %d", n, tc.charges)
			}
		})
	}
	t.Run("a request whose claim expired cannot commit", func(t *testing.T) {
		env := newEnv(t)
		entered, release := make(chan struct{}), make(chan struct{})
		h := &chargeHandler{charge: env.Charge, script: []string{"block", "ok"}, entered: entered, release: release}
		url := txServer(t, lapsing{TxStore: env.Store, lock: lapse}, h, 0)
		slow := make(chan int)
		go func() { code, _ := postKey(t, url, "tx-4"); slow <- code }()
		select {
		case <-entered: // the first request holds the claim, its transaction open
		case <-time.After(time.Minute):
			t.Fatal("the first request's handler did not run within a minute")
		}
		// Once its claim lapses in the store, a retry runs.
		if code, body := untilFresh(t, url, "tx-4"); code != 201 {
			close(release)
			t.Fatalf("second: %d %s, want 201 once the first's claim lapsed", code, body)
		}
		close(release)
		if code := <-slow; code != 503 {
			t.Errorf("the first request answered %d, want 503 (its commit must fail)", code)
		}
		if n := env.Charges(); n != 1 {
			t.Fatalf("%d charges, want 1: the first request's effect must roll back", n)
		}
	})
	t.Run("needs a TxStore", func(t *testing.T) {
		_, err := idempotency.New(idempotency.Options{Transactional: true})
		if err == nil || !strings.Contains(err.Error(), "needs a TxStore") {
			t.Fatalf("err = %v", err)
		}
	})
}

// chargeHandler charges through the request's transaction and answers
// by its script: "ok" (201), "503", "panic", "block" (tells entered, waits
// for release, then 201); the last step repeats.
type chargeHandler struct {
	charge           func(r *http.Request) (int64, error)
	entered, release chan struct{}
	mu               sync.Mutex
	script           []string
	calls            int
}

func (h *chargeHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	step := h.script[min(h.calls, len(h.script)-1)]
	h.calls++
	h.mu.Unlock()
	id, err := h.charge(r)
	if err != nil {
		http.Error(w, err.Error(), 500)
		return
	}
	switch step {
	case "503":
		http.Error(w, "downstream unavailable", http.StatusServiceUnavailable)
		return
	case "panic":
		panic("handler bug")
	case "block":
		h.entered <- struct{}{}
		<-h.release
	}
	w.WriteHeader(http.StatusCreated)
	fmt.Fprintf(w, `{"id":%d}`, id)
}

// lapse is how long a lapsing store's claims hold their key.
const lapse = 200 * time.Millisecond

// lapsing is a store whose claims lapse after lock, in the store, whatever
// LockTimeout the middleware claims with, and are never extended: the
// process holding them is cut off from the database. The middleware keeps
// its own LockTimeout, and the StoreTimeout that follows from it (a third
// of it), so that a store call slowed by a loaded machine is not taken for
// a store that stalls, as it would be under a LockTimeout as short as the
// lapse.
type lapsing struct {
	idempotency.TxStore
	lock time.Duration
}

func (s lapsing) Claim(ctx context.Context, p idempotency.ClaimParams) (*idempotency.Record, error) {
	p.Lock = s.lock
	return s.TxStore.Claim(ctx, p)
}

func (lapsing) Extend(context.Context, idempotency.ExtendParams) error { return nil }

// untilFresh posts key until the answer is not a 409 (the key still held),
// for up to a minute: how long the key stays held depends on the store's
// clock and the machine's load, not on a sleep the test could time.
func untilFresh(t *testing.T, url, key string) (int, string) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
		code, body := postKey(t, url, key)
		if code != http.StatusConflict || time.Now().After(deadline) {
			return code, body
		}
	}
}

func txServer(t *testing.T, s idempotency.TxStore, h http.Handler, lock time.Duration) string {
	m, err := idempotency.New(idempotency.Options{Store: s, Transactional: true, LockTimeout: lock, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	// Recover handler panics here so the server keeps serving; the
	// middleware has re-raised them after releasing the claim.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				http.Error(w, fmt.Sprint(v), 500)
			}
		}()
		m.Handler(h).ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func postKey(t *testing.T, url, key string) (int, string) {
	req, _ := http.NewRequest("POST", url, strings.NewReader(`{"amount":100}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Error(err)
		return 0, ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// quiet is the scenarios' middleware logger.
var quiet = slog.New(slog.DiscardHandler)

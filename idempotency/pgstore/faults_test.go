package pgstore_test

// Fault tests on a real PostgreSQL: a claim whose reply is
// lost on the wire, backends terminated under the pool, concurrent
// migrations, and a service killed with requests in flight.

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/retryhttp/retryhttp"
	"github.com/retryhttp/retryhttp/idempotency"
	"github.com/retryhttp/retryhttp/idempotency/pgstore"
	"github.com/retryhttp/retryhttp/shared/faultproxy"
	"github.com/retryhttp/retryhttp/shared/testenv"
)

// poolVia connects to the test database through addr (a proxy) with the
// given pool settings.
func poolVia(t *testing.T, addr string, params string) *pgxpool.Pool {
	t.Helper()
	pool(t) // skips or fails loudly when PostgreSQL is unreachable
	u, err := url.Parse(testenv.PostgresDSN())
	if err != nil {
		t.Fatal(err)
	}
	if addr != "" {
		u.Host = addr
	}
	q := u.Query()
	for _, kv := range strings.Split(params, "&") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			q.Set(k, v)
		}
	}
	u.RawQuery = q.Encode()
	p, err := pgxpool.New(context.Background(), u.String())
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Ping(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// countingHandler records one charge per run and answers 201.
type countingHandler struct{ n atomic.Int32 }

func (h *countingHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := h.n.Add(1)
	w.WriteHeader(http.StatusCreated)
	fmt.Fprintf(w, `{"id":%d}`, n)
}

func quietOptions(o idempotency.Options) idempotency.Options {
	o.Logger = quiet
	return o
}

// The claim committed, its reply was lost on the wire. The request
// gets 503 and its claim is released, so the retry runs at once instead
// of meeting 409 until LockTimeout.
func TestClaimReplyLost(t *testing.T) {
	s := newStore(t) // the table, made directly
	host := strings.TrimPrefix(strings.Split(strings.Split(testenv.PostgresDSN(), "@")[1], "/")[0], "")
	proxy := faultproxy.Start(t, host)
	p := poolVia(t, proxy.Addr(), "pool_max_conns=1")
	ps, err := pgstore.New(p, tableOf(t, s))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// Warm the one connection's statement cache, so that the next claim is
	// a single round trip: the one whose reply is lost.
	if _, err := ps.Claim(ctx, idempotency.ClaimParams{Key: "warm-up", Fingerprint: "fp", Owner: "o", Lock: time.Minute}); err != nil {
		t.Fatal(err)
	}
	h := &countingHandler{}
	m, err := idempotency.New(quietOptions(idempotency.Options{Store: ps, LockTimeout: time.Minute}))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(m.Handler(h))
	defer srv.Close()

	proxy.LoseNextReply()
	if code, body := postKey(t, srv.URL, "lost-1"); code != 503 {
		t.Fatalf("first: %d %s, want 503", code, body)
	}
	// The release runs after the answer, within StoreTimeout.
	var owner string
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		err := pool(t).QueryRow(ctx, "SELECT owner FROM "+tableOf(t, s)+" WHERE key <> 'warm-up'").Scan(&owner)
		if err != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the claim (owner %s) is still there: it was not released", owner)
		}
	}
	if code, body := postKey(t, srv.URL, "lost-1"); code != 201 {
		t.Fatalf("retry: %d %s, want a fresh 201", code, body)
	}
	if h.n.Load() != 1 {
		t.Fatalf("%d charges, want 1", h.n.Load())
	}
}

// A store that stalls before the claim (replies black-holed on an open
// connection) answers 503 within StoreTimeout; the handler never runs.
func TestStalledClaimAnswersWithinStoreTimeout(t *testing.T) {
	s := newStore(t)
	host := strings.Split(strings.Split(testenv.PostgresDSN(), "@")[1], "/")[0]
	proxy := faultproxy.Start(t, host)
	p := poolVia(t, proxy.Addr(), "pool_max_conns=2")
	ps, err := pgstore.New(p, tableOf(t, s))
	if err != nil {
		t.Fatal(err)
	}
	h := &countingHandler{}
	m, err := idempotency.New(quietOptions(idempotency.Options{Store: ps, StoreTimeout: 300 * time.Millisecond}))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(m.Handler(h))
	defer srv.Close()
	proxy.Stall()
	defer proxy.Heal()
	start := time.Now()
	code, _ := postKey(t, srv.URL, "stalled-1")
	took := time.Since(start)
	if code != 503 || h.n.Load() != 0 {
		t.Fatalf("%d after %v with %d charges, want 503 and none", code, took, h.n.Load())
	}
	if took > 3*time.Second {
		t.Fatalf("503 after %v: the claim was not bounded by StoreTimeout (300ms)", took)
	}
}

// Every backend of the store's pool is terminated (a failover)
// while the handler runs. Complete meets a dead connection, tries again on
// a fresh one and records the response: the retry, even after
// LockTimeout, is a replay, not a second charge.
func TestBackendsTerminatedBeforeComplete(t *testing.T) {
	s := newStore(t)
	app := "retryhttp_test_" + strings.ReplaceAll(uuid.NewString(), "-", "")[:12]
	p := poolVia(t, "", "pool_max_conns=4&application_name="+app)
	ps, err := pgstore.New(p, tableOf(t, s))
	if err != nil {
		t.Fatal(err)
	}
	admin := pool(t)
	// Open the pool's connections, so there are several to kill.
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() { p.Exec(context.Background(), "SELECT pg_sleep(0.05)") })
	}
	wg.Wait()
	var charges atomic.Int32
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		charges.Add(1)
		var killed int
		admin.QueryRow(r.Context(), `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = $1`, app).Scan(&killed)
		if killed == 0 {
			t.Error("no backend terminated")
		}
		time.Sleep(50 * time.Millisecond) // let the terminations land
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, `{"id":1}`)
	})
	m, err := idempotency.New(quietOptions(idempotency.Options{Store: ps, LockTimeout: time.Second}))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(m.Handler(handler))
	defer srv.Close()
	if code, _ := postKey(t, srv.URL, "failover-1"); code != 201 {
		t.Fatalf("first: %d", code)
	}
	time.Sleep(1500 * time.Millisecond) // past LockTimeout
	code, body := postKey(t, srv.URL, "failover-1")
	if code != 201 || charges.Load() != 1 {
		t.Fatalf("retry after LockTimeout: %d %s, %d charges; want a replay and 1 charge", code, body, charges.Load())
	}
}

// Replicas running Migrate at once on a first deploy.
func TestMigrateConcurrently(t *testing.T) {
	p := pool(t)
	for round := range 5 {
		table := fmt.Sprintf("idem_mig_%d_%s", round, strings.ReplaceAll(uuid.NewString(), "-", "")[:12])
		t.Cleanup(func() {
			p.Exec(context.Background(), "DROP TABLE IF EXISTS "+table)
			p.Exec(context.Background(), "DELETE FROM retryhttp_schema_versions WHERE name = $1", table)
		})
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for range 8 {
			wg.Go(func() {
				s, err := pgstore.New(p, table)
				if err == nil {
					err = s.Migrate(context.Background())
				}
				errs <- err
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
		}
	}
}

// tableOf recovers a store's table from the test's bookkeeping.
func tableOf(t *testing.T, s *pgstore.Store) string {
	t.Helper()
	name, ok := tables.Load(s)
	if !ok {
		t.Fatal("store not made by newStore")
	}
	return name.(string)
}

var tables sync.Map // *pgstore.Store -> table name

// A service is killed (SIGKILL) with requests in flight and started
// again. Its claims are neither extended nor released; the clients' retries
// meet 409 with a Retry-After of the claim's remaining time, wait it out,
// and every order is charged exactly once (transactional mode rolls the
// killed requests' effects back).
func TestServiceKilledMidRequest(t *testing.T) {
	if os.Getenv("RETRYHTTP_CHILD_ADDR") != "" {
		t.Skip("in the child")
	}
	s := newStore(t)
	p := pool(t)
	charges := chargesTable(t, p)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	start := func() *exec.Cmd {
		cmd := exec.Command(os.Args[0], "-test.run=^TestChildServer$")
		cmd.Env = append(os.Environ(), "RETRYHTTP_CHILD_ADDR="+addr, "RETRYHTTP_CHILD_TABLE="+tableOf(t, s), "RETRYHTTP_CHILD_CHARGES="+charges)
		cmd.Stdout, cmd.Stderr = io.Discard, os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		for range 200 {
			if c, err := net.Dial("tcp", addr); err == nil {
				c.Close()
				return cmd
			}
			time.Sleep(10 * time.Millisecond)
		}
		t.Fatal("child server did not start")
		return nil
	}
	child := start()

	const orders = 40
	var serving atomic.Value // a channel closed while the child serves
	up := make(chan struct{})
	close(up)
	serving.Store(up)
	tr := &retryhttp.Transport{
		InjectIdempotencyKey: true,
		Budget:               retryhttp.NoBudget,
		// Twenty attempts 100 ms apart span 2 s, less than the child's 8 s
		// lock: only a Retry-After that says how long the crashed claim
		// holds gets the client past it (a fixed "1" does not). The spare
		// attempts absorb a claim that outlasts StoreTimeout (503) after
		// the restart.
		Policy: retryhttp.Policy{MaxAttempts: 20, BaseDelay: 100 * time.Millisecond, MaxDelay: 100 * time.Millisecond},
		// While the test restarts the child, attempts wait for it rather
		// than spend themselves on refused connections: how long a restart
		// takes is the machine's load (several seconds under -race and
		// busy cores), not what the scenario is about.
		BeforeAttempt: func(req *http.Request) error {
			select {
			case <-serving.Load().(chan struct{}):
				return nil
			case <-req.Context().Done():
				return context.Cause(req.Context())
			}
		},
	}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	var wg sync.WaitGroup
	var ok atomic.Int32
	sem := make(chan struct{}, 16)
	for i := range orders {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			resp, err := client.Post("http://"+addr+"/orders", "application/json", strings.NewReader(fmt.Sprintf(`{"order":%d}`, i)))
			if err != nil {
				t.Errorf("order %d: %v", i, err)
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 201 {
				t.Errorf("order %d: %d", i, resp.StatusCode)
				return
			}
			ok.Add(1)
		})
	}
	time.Sleep(150 * time.Millisecond) // the first 16 are in their handlers
	restarted := make(chan struct{})
	serving.Store(restarted)
	child.Process.Signal(syscall.SIGKILL)
	child.Wait()
	child = start()
	close(restarted)
	wg.Wait()
	child.Process.Signal(syscall.SIGKILL)
	child.Wait()

	rows, err := p.Query(context.Background(), "SELECT amount, count(*) FROM "+charges+" GROUP BY amount")
	if err != nil {
		t.Fatal(err)
	}
	perOrder := map[int]int{}
	for rows.Next() {
		var order, n int
		rows.Scan(&order, &n)
		perOrder[order] = n
	}
	if int(ok.Load()) != orders || len(perOrder) != orders {
		t.Fatalf("%d orders answered 201, %d charged, want %d of each", ok.Load(), len(perOrder), orders)
	}
	for order, n := range perOrder {
		if n != 1 {
			t.Errorf("order %d charged %d times", order, n)
		}
	}
}

// TestChildServer is the service TestServiceKilledMidRequest kills: the
// middleware on pgstore in transactional mode, a handler that charges
// through the request's transaction and takes 300 ms.
func TestChildServer(t *testing.T) {
	addr := os.Getenv("RETRYHTTP_CHILD_ADDR")
	if addr == "" {
		t.Skip("run by TestServiceKilledMidRequest")
	}
	// 16 requests at once, each holding its transaction's connection for
	// 300 ms: a pool with room for all of them and their claims.
	p := poolVia(t, "", "pool_max_conns=40")
	s, err := pgstore.New(p, os.Getenv("RETRYHTTP_CHILD_TABLE"))
	if err != nil {
		t.Fatal(err)
	}
	charges := os.Getenv("RETRYHTTP_CHILD_CHARGES")
	m, err := idempotency.New(quietOptions(idempotency.Options{Store: s, Transactional: true, LockTimeout: 8 * time.Second}))
	if err != nil {
		t.Fatal(err)
	}
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var in struct{ Order int }
		body, _ := io.ReadAll(r.Body)
		fmt.Sscanf(string(body), `{"order":%d}`, &in.Order)
		tx, err := pgstore.Tx(r.Context())
		if err == nil {
			_, err = tx.Exec(r.Context(), "INSERT INTO "+charges+" (amount) VALUES ($1)", in.Order)
		}
		if err != nil {
			http.Error(w, err.Error(), 503)
			return
		}
		time.Sleep(300 * time.Millisecond)
		w.WriteHeader(http.StatusCreated)
	})
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	http.Serve(ln, m.Handler(handler))
}

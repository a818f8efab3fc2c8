package mysqlstore_test

// Fault tests on a MariaDB server the test starts itself (mariadb-install-db
// into a temporary directory, mariadbd on a free port, stopped by its pid):
// the server killed with SIGKILL and started again under load, and every
// connection cut through a TCP proxy under load. Never the machine's
// shared server.

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/retryhttp/retryhttp"
	"github.com/retryhttp/retryhttp/idempotency"
	"github.com/retryhttp/retryhttp/idempotency/mysqlstore"
	"github.com/retryhttp/retryhttp/shared/faultproxy"
	"github.com/retryhttp/retryhttp/shared/mysqltest"
	"github.com/retryhttp/retryhttp/shared/testenv"
)

// ownServer is a mariadbd of the test's own.
type ownServer struct {
	t    *testing.T
	dir  string
	addr string
	cmd  *exec.Cmd
}

// startOwnServer installs a data directory and starts mariadbd on a free
// loopback port. Without mariadbd on the machine the test is skipped
// loudly (failed under CI=true).
func startOwnServer(t *testing.T) *ownServer {
	t.Helper()
	for _, bin := range []string{"mariadb-install-db", "mariadbd"} {
		if _, err := exec.LookPath(bin); err != nil {
			if _, err2 := os.Stat("/usr/sbin/" + bin); err2 != nil {
				testenv.Unreachable(t, "mariadbd", bin, err)
			}
		}
	}
	dir := t.TempDir()
	install := exec.Command("mariadb-install-db", "--no-defaults", "--datadir="+filepath.Join(dir, "data"),
		"--auth-root-authentication-method=normal", "--skip-test-db", "--user="+currentUser())
	if out, err := install.CombinedOutput(); err != nil {
		t.Fatalf("mariadb-install-db: %v\n%s", err, out)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &ownServer{t: t, dir: dir, addr: ln.Addr().String()}
	ln.Close()
	s.start()
	t.Cleanup(s.kill)
	db, err := sql.Open("mysql", "root@tcp("+s.addr+")/")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec("CREATE DATABASE test"); err != nil {
		t.Fatal(err)
	}
	return s
}

func currentUser() string {
	if u := os.Getenv("USER"); u != "" {
		return u
	}
	return "root"
}

func (s *ownServer) dsn() string { return "root@tcp(" + s.addr + ")/test" }

// start runs mariadbd on the data directory and waits until it answers.
func (s *ownServer) start() {
	s.t.Helper()
	_, port, _ := net.SplitHostPort(s.addr)
	bin := "mariadbd"
	if _, err := exec.LookPath(bin); err != nil {
		bin = "/usr/sbin/mariadbd"
	}
	log, err := os.OpenFile(filepath.Join(s.dir, "server.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		s.t.Fatal(err)
	}
	defer log.Close()
	s.cmd = exec.Command(bin, "--no-defaults", "--datadir="+filepath.Join(s.dir, "data"), "--port="+port,
		"--bind-address=127.0.0.1", "--socket="+filepath.Join(s.dir, "sock"), "--user="+currentUser(),
		"--innodb-buffer-pool-size=32M", "--skip-log-bin", "--max-connections=200")
	s.cmd.Stdout, s.cmd.Stderr = log, log
	if err := s.cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if c, err := net.Dial("tcp", s.addr); err == nil {
			c.Close()
			return
		}
	}
	b, _ := os.ReadFile(filepath.Join(s.dir, "server.log"))
	s.t.Fatalf("mariadbd did not start on %s:\n%s", s.addr, b)
}

// kill stops the server with SIGKILL, by its pid, and waits for it.
func (s *ownServer) kill() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	syscall.Kill(s.cmd.Process.Pid, syscall.SIGKILL)
	s.cmd.Wait()
	s.cmd = nil
}

// faultFigures are what a run under faults shows.
type faultFigures struct {
	orders, lost, doubles, attempts int
}

// runOrders posts orders POSTs through a retryhttp Transport (one key per
// order, kept on every attempt) to the middleware in transactional mode on
// a Store over db, whose handler writes the charge through the request's
// transaction; fault runs while they go. It then counts the charges per
// order in the database: a lost order has none or no 201, a double has two.
func runOrders(t *testing.T, db *sql.DB, orders int, fault func()) faultFigures {
	t.Helper()
	s, _ := newStoreOn(t, db)
	charges := tableName("charges")
	if _, err := db.Exec("CREATE TABLE " + charges + " (id BIGINT AUTO_INCREMENT PRIMARY KEY, order_id VARCHAR(64) NOT NULL) ENGINE=InnoDB"); err != nil {
		t.Fatal(err)
	}
	m, err := idempotency.New(idempotency.Options{Store: s, Transactional: true, LockTimeout: 3 * time.Second,
		StoreTimeout: 500 * time.Millisecond, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(m.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tx, err := mysqlstore.Tx(r.Context())
		if err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		if _, err := tx.ExecContext(r.Context(), "INSERT INTO "+charges+" (order_id) VALUES (?)", r.URL.Query().Get("order")); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusCreated)
	})))
	defer srv.Close()
	var sent atomic.Int64
	tr := &retryhttp.Transport{
		InjectIdempotencyKey: true,
		Budget:               retryhttp.NoBudget,
		Logger:               quiet,
		// Attempts for 30 s at most: a restart under -race on a busy
		// machine, then a claim whose transaction died with the server
		// held until its 3 s LockTimeout.
		Policy: retryhttp.Policy{MaxAttempts: 300, BaseDelay: 20 * time.Millisecond, MaxDelay: 200 * time.Millisecond, MaxElapsed: 30 * time.Second},
		Hooks: []retryhttp.Hook{retryhttp.HookFunc(func(_ context.Context, e retryhttp.Event) {
			if e.Kind == retryhttp.EventRetry {
				sent.Add(1)
			}
		})},
	}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	var wg sync.WaitGroup
	var created atomic.Int64
	next := make(chan int)
	for range 16 {
		wg.Go(func() {
			for i := range next {
				resp, err := client.Post(fmt.Sprintf("%s/charges?order=o%d", srv.URL, i), "application/json", strings.NewReader(fmt.Sprintf(`{"order":%d}`, i)))
				if err != nil {
					continue
				}
				resp.Body.Close()
				if resp.StatusCode == http.StatusCreated {
					created.Add(1)
				}
			}
		})
	}
	faulted := make(chan struct{})
	for i := range orders {
		if i == orders/3 {
			go func() { fault(); close(faulted) }()
		}
		next <- i
	}
	close(next)
	wg.Wait()
	<-faulted
	f := faultFigures{orders: orders, attempts: orders + int(sent.Load())}
	rows, err := db.Query("SELECT order_id, COUNT(*) FROM " + charges + " GROUP BY order_id")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	charged := 0
	for rows.Next() {
		var id string
		var n int
		if err := rows.Scan(&id, &n); err != nil {
			t.Fatal(err)
		}
		charged++
		if n > 1 {
			f.doubles++
		}
	}
	f.lost = orders - charged + (orders - int(created.Load()))
	return f
}

// The server killed with SIGKILL and started again, twice, while orders
// are posted: every order is charged once and answered 201.
func TestServerKilledUnderLoad(t *testing.T) {
	own := startOwnServer(t)
	db := mysqltest.Open(t, own.dsn())
	db.SetMaxOpenConns(40)
	f := runOrders(t, db, 600, func() {
		for range 2 {
			time.Sleep(150 * time.Millisecond)
			own.kill()
			own.start()
		}
	})
	t.Logf("server killed twice: %d orders, %d attempts, %d lost, %d charged twice", f.orders, f.attempts, f.lost, f.doubles)
	if f.lost != 0 || f.doubles != 0 {
		t.Fatalf("%d orders lost, %d charged twice; want 0 and 0", f.lost, f.doubles)
	}
	if f.attempts == f.orders {
		t.Fatal("no attempt was retried: the kills did not reach the requests")
	}
}

// Every connection cut through the proxy, three times, while orders are
// posted: every order is charged once and answered 201.
func TestConnectionsCutUnderLoad(t *testing.T) {
	own := startOwnServer(t)
	proxy := faultproxy.Start(t, own.addr)
	db := mysqltest.Open(t, strings.Replace(own.dsn(), own.addr, proxy.Addr(), 1))
	db.SetMaxOpenConns(40)
	f := runOrders(t, db, 600, func() {
		for range 3 {
			time.Sleep(100 * time.Millisecond)
			proxy.CutAll()
		}
	})
	t.Logf("connections cut three times: %d orders, %d attempts, %d lost, %d charged twice", f.orders, f.attempts, f.lost, f.doubles)
	if f.lost != 0 || f.doubles != 0 {
		t.Fatalf("%d orders lost, %d charged twice; want 0 and 0", f.lost, f.doubles)
	}
	if f.attempts == f.orders {
		t.Fatal("no attempt was retried: the cuts did not reach the requests")
	}
}

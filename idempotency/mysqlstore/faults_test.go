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
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retryhttp/retryhttp"
	"github.com/retryhttp/retryhttp/idempotency"
	"github.com/retryhttp/retryhttp/idempotency/mysqlstore"
	"github.com/retryhttp/retryhttp/shared/faultproxy"
	"github.com/retryhttp/retryhttp/shared/mysqltest"
)

// faultFigures are what a run under faults shows.
type faultFigures struct {
	orders, lost, doubles, attempts int
}

// runOrders posts at least orders POSTs through a retryhttp Transport
// (one key per order, kept on every attempt) to the middleware in
// transactional mode on a Store over db, whose handler writes the charge
// through the request's transaction; fault runs while they go, from the
// third of them on, and orders are posted until it has returned, however
// fast the machine answers them. It then counts the charges per order in
// the database: a lost order has none or no 201, a double has two.
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
	posted := 0
	for ; posted < orders || !closed(faulted); posted++ {
		if posted == orders/3 {
			go func() { fault(); close(faulted) }()
		}
		next <- posted
	}
	close(next)
	wg.Wait()
	orders = posted
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
	own := mysqltest.StartServer(t)
	db := mysqltest.Open(t, own.DSN())
	db.SetMaxOpenConns(40)
	f := runOrders(t, db, 600, func() {
		for range 2 {
			time.Sleep(150 * time.Millisecond)
			own.Kill()
			own.Start()
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
	own := mysqltest.StartServer(t)
	proxy := faultproxy.Start(t, own.Addr)
	db := mysqltest.Open(t, strings.Replace(own.DSN(), own.Addr, proxy.Addr(), 1))
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

// closed reports whether c is closed, without waiting.
func closed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

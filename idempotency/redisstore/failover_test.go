package redisstore_test

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/retryhttp/retryhttp/idempotency"
	"github.com/retryhttp/retryhttp/idempotency/redisstore"
)

// failoverFigures is what one failover run counted.
type failoverFigures struct {
	requests, lost, keys, doubled int
	unreplicated                  uint64
}

// runFailover sends POSTs with Idempotency-Keys through the middleware on a
// 6-node cluster of its own, from 16 goroutines, one in five reusing a key
// already sent; a second in, the master of one third of the slots is
// killed with SIGKILL and its replica promoted. Afterwards every key is
// sent once more, as a client's retry would. A key whose handler ran more
// than once is a double effect; a request answered with an error or a 5xx
// is a lost answer.
func runFailover(t *testing.T, o redisstore.Options) failoverFigures {
	client, cluster := startCluster(t, "--repl-diskless-sync-delay", "0")
	o.Prefix, o.Logger = "failover:"+uuid.NewString()+":", slog.New(slog.DiscardHandler)
	store, err := redisstore.New(client, o)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	effects := map[string]int{}
	mw, err := idempotency.New(idempotency.Options{Store: store, LockTimeout: 2 * time.Second, StoreTimeout: 500 * time.Millisecond,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		effects[r.Header.Get("Idempotency-Key")]++
		mu.Unlock()
		w.WriteHeader(http.StatusCreated)
	})))
	defer srv.Close()
	httpc := &http.Client{Timeout: 5 * time.Second}
	send := func(key string) bool {
		req, _ := http.NewRequest("POST", srv.URL+"/charges", strings.NewReader(`{"amount":1}`))
		req.Header.Set("Idempotency-Key", key)
		req.Header.Set("Content-Type", "application/json")
		resp, err := httpc.Do(req)
		if err != nil {
			return false
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode < 500
	}

	victim := cluster.masterOf(client, "failover-victim-slot")
	var keysMu sync.Mutex
	var keys []string
	var requests, lost atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				keysMu.Lock()
				key := ""
				if i%5 == 4 && len(keys) > 0 {
					key = keys[(g*7919+i)%len(keys)]
				} else {
					key = fmt.Sprintf("k-%d-%d", g, i)
					keys = append(keys, key)
				}
				keysMu.Unlock()
				requests.Add(1)
				if !send(key) {
					lost.Add(1)
				}
			}
		})
	}
	time.Sleep(time.Second)
	victim.kill()
	time.Sleep(4 * clusterNodeTimeout)
	close(stop)
	wg.Wait()
	cluster.waitOK(client)
	for _, key := range keys { // every client retries once after the failover
		requests.Add(1)
		if !send(key) {
			lost.Add(1)
		}
	}
	f := failoverFigures{requests: int(requests.Load()), lost: int(lost.Load()), keys: len(keys), unreplicated: store.Unreplicated()}
	for _, n := range effects {
		if n > 1 {
			f.doubled++
		}
	}
	return f
}

// A master killed under load, without and with Options.Replicas: the
// figures docs/server.md gives. A measurement, run on demand
// (RETRYHTTP_FAILOVER=1): each run takes about ten seconds and its counts
// depend on the timing of the kill.
func TestFailoverUnderLoad(t *testing.T) {
	if os.Getenv("RETRYHTTP_FAILOVER") == "" {
		t.Skip("a measurement: set RETRYHTTP_FAILOVER=1 to run it")
	}
	runs, _ := strconv.Atoi(os.Getenv("RETRYHTTP_FAILOVER_RUNS"))
	runs = max(runs, 1)
	for _, c := range []struct {
		name string
		opts redisstore.Options
	}{{"async replication", redisstore.Options{}}, {"Replicas 1, ReplicaTimeout 100ms", redisstore.Options{Replicas: 1, ReplicaTimeout: 100 * time.Millisecond}}} {
		for run := range runs {
			f := runFailover(t, c.opts)
			t.Logf("%s, run %d: %d requests over %d keys, %d answers lost, %d keys with a double effect, %d unreplicated completions",
				c.name, run+1, f.requests, f.keys, f.lost, f.doubled, f.unreplicated)
		}
	}
}

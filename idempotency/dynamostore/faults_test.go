package dynamostore_test

// Fault tests on dynalite: a claim whose reply is lost on the wire, a
// store that stalls, DynamoDB throttling every request, and the store's
// process killed (by pid) and started again under a request.

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/retryhttp/retryhttp/idempotency"
	"github.com/retryhttp/retryhttp/idempotency/dynamostore"
	"github.com/retryhttp/retryhttp/idempotency/storetest"
	"github.com/retryhttp/retryhttp/shared/dynamotest"
	"github.com/retryhttp/retryhttp/shared/faultproxy"
)

type charge struct{ n atomic.Int32 }

func (c *charge) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := c.n.Add(1)
	w.WriteHeader(http.StatusCreated)
	fmt.Fprintf(w, `{"id":%d}`, n)
}

func serve(t *testing.T, s idempotency.Store, h http.Handler, o idempotency.Options) string {
	t.Helper()
	o.Store, o.Logger = s, slog.New(slog.DiscardHandler)
	m, err := idempotency.New(o)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(m.Handler(h))
	t.Cleanup(srv.Close)
	return srv.URL
}

func post(t *testing.T, url, key string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("POST", url+"/charges", strings.NewReader(`{"amount":1}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// untilNot posts until the answer is not 409 (a claim still held), for up
// to 10 s.
func untilNot(t *testing.T, url, key string) (int, string) {
	t.Helper()
	code, body := post(t, url, key)
	for deadline := time.Now().Add(10 * time.Second); code == http.StatusConflict && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
		code, body = post(t, url, key)
	}
	return code, body
}

// proxied returns a store on a table of srv whose client reaches it
// through a fault proxy, with the SDK's retryer making attempts attempts
// a call.
func proxied(t *testing.T, srv *dynamotest.Server, attempts int) (*dynamostore.Store, *faultproxy.Proxy) {
	t.Helper()
	proxy := faultproxy.Start(t, srv.Addr)
	c := srv.Client(func(o *dynamodb.Options) {
		o.BaseEndpoint = aws.String("http://" + proxy.Addr())
		o.RetryMaxAttempts = attempts
	})
	s := newStore(t, srv, c)
	return s, proxy
}

// The claim ran, its reply was lost; the SDK sent it again and found the
// request's own claim: the handler runs once, no 409.
func TestClaimReplyLostRetriedBySDK(t *testing.T) {
	s, proxy := proxied(t, dynamotest.Start(t), 0)
	storetest.RunLostReply(t, s, proxy.LoseNextReply, true)
}

// With the SDK's retries off: 503, the claim is released, and the retry
// runs at once rather than after LockTimeout.
func TestClaimReplyLostNoSDKRetries(t *testing.T) {
	s, proxy := proxied(t, dynamotest.Start(t), 1)
	storetest.RunLostReply(t, s, proxy.LoseNextReply, false)
}

// A store that stalls (replies black-holed on open connections) answers
// 503 within StoreTimeout, whatever the SDK's retries; the handler never
// runs, and once the store is back the retry runs once.
func TestStalledClaimAnswersWithinStoreTimeout(t *testing.T) {
	srv := dynamotest.Start(t)
	s, proxy := proxied(t, srv, 0)
	c := &charge{}
	u := serve(t, s, c, idempotency.Options{StoreTimeout: 300 * time.Millisecond})
	proxy.Stall()
	start := time.Now()
	code, _ := post(t, u, "stalled-1")
	took := time.Since(start)
	proxy.Heal()
	if code != 503 || c.n.Load() != 0 {
		t.Fatalf("%d after %v with %d charges, want 503 and none", code, took, c.n.Load())
	}
	if took > 3*time.Second {
		t.Fatalf("503 after %v: the claim was not bounded by StoreTimeout (300ms)", took)
	}
	if code, body := untilNot(t, u, "stalled-1"); code != 201 || c.n.Load() != 1 {
		t.Fatalf("after the stall: %d %s, %d charges; want 201 and 1", code, body, c.n.Load())
	}
}

// throttler answers every request with DynamoDB's throttling error while
// on, and passes them to dynalite otherwise.
type throttler struct {
	on    atomic.Bool
	seen  atomic.Int32
	proxy *httputil.ReverseProxy
}

func (th *throttler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !th.on.Load() {
		th.proxy.ServeHTTP(w, r)
		return
	}
	th.seen.Add(1)
	w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	w.WriteHeader(http.StatusBadRequest)
	io.WriteString(w, `{"__type":"com.amazonaws.dynamodb.v20120810#ProvisionedThroughputExceededException","message":"The level of configured provisioned throughput for the table was exceeded."}`)
}

// A throttled table (ProvisionedThroughputExceededException on every
// request) answers the claim 503 once the SDK's retries are spent, and
// the handler does not run; once the throttling ends the retry runs once.
func TestThrottledClaimAnswers503(t *testing.T) {
	t.Parallel() // it waits more than it works
	srv := dynamotest.Start(t)
	target, _ := url.Parse(srv.URL)
	th := &throttler{proxy: httputil.NewSingleHostReverseProxy(target)}
	front := httptest.NewServer(th)
	t.Cleanup(front.Close)
	c := srv.Client(func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(front.URL) })
	s := newStore(t, srv, c)
	h := &charge{}
	u := serve(t, s, h, idempotency.Options{})
	th.on.Store(true)
	code, body := post(t, u, "throttled-1")
	if code != 503 || h.n.Load() != 0 {
		t.Fatalf("%d %s with %d charges, want 503 and none", code, body, h.n.Load())
	}
	if th.seen.Load() < 2 {
		t.Fatalf("%d throttled requests, want the SDK to have retried", th.seen.Load())
	}
	th.on.Store(false)
	if code, body := untilNot(t, u, "throttled-1"); code != 201 || h.n.Load() != 1 {
		t.Fatalf("after the throttling: %d %s, %d charges; want 201 and 1", code, body, h.n.Load())
	}
}

// The store's process is killed (SIGKILL, by pid) while the handler runs,
// and started again on its tables before the handler ends. The
// completion reaches the new process, and the retry is a replay.
func TestStoreKilledUnderHandler(t *testing.T) {
	srv := dynamotest.Start(t)
	s := newStore(t, srv, srv.Client())
	var charges atomic.Int32
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		charges.Add(1)
		srv.Kill()
		if err := srv.Restart(); err != nil {
			t.Error(err)
		}
		w.WriteHeader(http.StatusCreated)
	})
	u := serve(t, s, h, idempotency.Options{LockTimeout: 5 * time.Second})
	if code, body := post(t, u, "killed-1"); code != 201 {
		t.Fatalf("first: %d %s", code, body)
	}
	if code, _ := post(t, u, "killed-1"); code != 201 || charges.Load() != 1 {
		t.Fatalf("retry: %d, %d charges; want a replay and 1 charge", code, charges.Load())
	}
}

// The store is down when a request comes: 503, the handler does not run;
// the store is started again and the retry runs once, and its own retry
// is a replay.
func TestStoreDownAtClaim(t *testing.T) {
	srv := dynamotest.Start(t)
	s := newStore(t, srv, srv.Client())
	c := &charge{}
	u := serve(t, s, c, idempotency.Options{})
	srv.Kill()
	if code, body := post(t, u, "down-1"); code != 503 || c.n.Load() != 0 {
		t.Fatalf("%d %s with %d charges, want 503 and none", code, body, c.n.Load())
	}
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if code, body := untilNot(t, u, "down-1"); code != 201 || c.n.Load() != 1 {
			t.Fatalf("after the restart: %d %s, %d charges; want 201 and 1", code, body, c.n.Load())
		}
	}
}

// A partition between one instance and DynamoDB while its handler runs:
// the handler is told to stop before its claim can lapse, and a retry on
// another instance charges once (storetest.RunPartition).
func TestPartitionedHandlerStopsBeforeItsClaimLapses(t *testing.T) {
	t.Parallel() // it waits more than it works
	srv := dynamotest.Start(t)
	partitioned, proxy := proxied(t, srv, 1)
	defer proxy.Heal()
	direct, err := dynamostore.New(srv.Client(), dynamostore.Options{Table: tables[partitioned], Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	storetest.RunPartition(t, partitioned, direct, proxy.Stall)
}

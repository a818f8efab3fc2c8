package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/awslabs/aws-lambda-go-api-proxy/httpadapter"
	"github.com/google/uuid"

	"github.com/retryhttp/retryhttp/idempotency/dynamostore"
	"github.com/retryhttp/retryhttp/shared/dynamotest"
)

// The function is invoked as Lambda invokes it: an API Gateway HTTP API
// event (payload format 2.0, testdata/charge.json) as JSON bytes into the
// handler lambda.Start would run, its answer read back as the JSON
// API Gateway receives; its records on dynalite 4.0.0, with
// aws-lambda-go, aws-lambda-go-api-proxy and aws-sdk-go-v2 at go.mod's
// versions.

// function is one Lambda execution environment: a cold start of the
// handler main builds, on table.
type function struct {
	handler lambda.Handler
	ledger  *ledger
}

func coldStart(t *testing.T, srv *dynamotest.Server, table string, l *ledger) *function {
	t.Helper()
	h, err := newHandler(srv.Client(), table, l)
	if err != nil {
		t.Fatal(err)
	}
	return &function{handler: lambda.NewHandler(httpadapter.NewV2(h).ProxyWithContext), ledger: l}
}

func (f *function) invoke(t *testing.T, event []byte) events.APIGatewayV2HTTPResponse {
	t.Helper()
	out, err := f.handler.Invoke(context.Background(), event)
	if err != nil {
		t.Fatalf("invoke: %v", err)
	}
	var resp events.APIGatewayV2HTTPResponse
	if err := json.Unmarshal(out, &resp); err != nil {
		t.Fatalf("answer %s: %v", out, err)
	}
	return resp
}

// event is testdata/charge.json with edit applied.
func event(t *testing.T, edit func(e map[string]any)) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/charge.json")
	if err != nil {
		t.Fatal(err)
	}
	var e map[string]any
	if err := json.Unmarshal(b, &e); err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		edit(e)
	}
	out, _ := json.Marshal(e)
	return out
}

func withKey(key string) func(map[string]any) {
	return func(e map[string]any) { e["headers"].(map[string]any)["idempotency-key"] = key }
}

func setup(t *testing.T) (*dynamotest.Server, string) {
	srv := dynamotest.Start(t)
	table := "charges-" + uuid.NewString()
	if err := dynamostore.CreateTable(context.Background(), srv.Client(), table); err != nil {
		t.Fatal(err)
	}
	return srv, table
}

// API Gateway resends an event, a client retries after a timeout, and a
// retry lands on another, cold environment: one charge, and each retry
// gets the first answer.
func TestChargesOnce(t *testing.T) {
	srv, table := setup(t)
	l := &ledger{}
	warm := coldStart(t, srv, table, l)
	first := warm.invoke(t, event(t, nil))
	if first.StatusCode != http.StatusCreated || !strings.Contains(first.Body, `"amount":250`) {
		t.Fatalf("first: %d %s", first.StatusCode, first.Body)
	}
	other := coldStart(t, srv, table, l)
	for _, f := range []*function{warm, other} {
		again := f.invoke(t, event(t, nil))
		if again.StatusCode != first.StatusCode || again.Body != first.Body {
			t.Fatalf("retry: %d %s, want the first answer %d %s", again.StatusCode, again.Body, first.StatusCode, first.Body)
		}
	}
	if n := l.charges.Load(); n != 1 {
		t.Fatalf("%d charges, want 1", n)
	}
}

// The event's answers where the key is missing, reused for another
// payload, or the body comes base64-encoded (as API Gateway sends a body
// it treats as binary).
func TestEvents(t *testing.T) {
	srv, table := setup(t)
	l := &ledger{}
	f := coldStart(t, srv, table, l)
	for _, tc := range []struct {
		name    string
		edit    func(map[string]any)
		status  int
		charges int64
	}{
		{"new key", withKey("order-2001"), http.StatusCreated, 1},
		{"no key", func(e map[string]any) { delete(e["headers"].(map[string]any), "idempotency-key") }, http.StatusBadRequest, 1},
		{"key reused for another amount", func(e map[string]any) {
			withKey("order-2001")(e)
			e["body"] = `{"amount":999}`
		}, http.StatusUnprocessableEntity, 1},
		{"base64 body", func(e map[string]any) {
			withKey("order-2002")(e)
			e["body"], e["isBase64Encoded"] = base64.StdEncoding.EncodeToString([]byte(`{"amount":5}`)), true
		}, http.StatusCreated, 2},
		{"base64 body again", func(e map[string]any) {
			withKey("order-2002")(e)
			e["body"], e["isBase64Encoded"] = base64.StdEncoding.EncodeToString([]byte(`{"amount":5}`)), true
		}, http.StatusCreated, 2},
		{"bad amount is not charged and not stored", func(e map[string]any) {
			withKey("order-2003")(e)
			e["body"] = `{"amount":0}`
		}, http.StatusBadRequest, 2},
	} {
		resp := f.invoke(t, event(t, tc.edit))
		if resp.StatusCode != tc.status || l.charges.Load() != tc.charges {
			t.Errorf("%s: %d %s with %d charges, want %d and %d", tc.name, resp.StatusCode, resp.Body, l.charges.Load(), tc.status, tc.charges)
		}
	}
}

// Lambda runs concurrent invocations of one event in separate
// environments: one charges, the others are answered 409 (in progress)
// or the replay, never a second charge.
func TestConcurrentEnvironments(t *testing.T) {
	srv, table := setup(t)
	l := &ledger{}
	ev := event(t, withKey("order-3001"))
	fs := make([]*function, 8)
	for i := range fs {
		fs[i] = coldStart(t, srv, table, l)
	}
	var wg sync.WaitGroup
	codes := make([]int, len(fs))
	for i, f := range fs {
		wg.Go(func() { codes[i] = f.invoke(t, ev).StatusCode })
	}
	wg.Wait()
	for _, c := range codes {
		if c != http.StatusCreated && c != http.StatusConflict {
			t.Fatalf("answers %v: want 201s and 409s", codes)
		}
	}
	if n := l.charges.Load(); n != 1 {
		t.Fatalf("%d charges, want 1 (answers %v)", n, codes)
	}
}

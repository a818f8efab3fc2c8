package dynamostore_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/uuid"

	"github.com/retryhttp/retryhttp/idempotency"
	"github.com/retryhttp/retryhttp/idempotency/dynamostore"
	"github.com/retryhttp/retryhttp/idempotency/storetest"
	"github.com/retryhttp/retryhttp/shared/dynamotest"
)

// Against dynalite 4.0.0 (shared/dynamotest), on aws-sdk-go-v2's
// service/dynamodb of go.mod.

// newStore returns a Store on a fresh table of srv.
func newStore(t testing.TB, srv *dynamotest.Server, client *dynamodb.Client) *dynamostore.Store {
	t.Helper()
	table := "idem-" + uuid.NewString()
	if err := dynamostore.CreateTable(context.Background(), client, table); err != nil {
		t.Fatal(err)
	}
	s, err := dynamostore.New(client, dynamostore.Options{Table: table, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	tablesMu.Lock()
	tables[s] = table
	tablesMu.Unlock()
	return s
}

// tables is each store's table, for a test that opens a second Store on
// it (another instance of the service).
var (
	tablesMu sync.Mutex
	tables   = map[*dynamostore.Store]string{}
)

func TestConformance(t *testing.T) {
	t.Parallel() // it waits more than it works
	srv := server(t)
	storetest.Run(t, func(t *testing.T) idempotency.Store { return newStore(t, srv, srv.Client()) })
}

func TestConformanceCached(t *testing.T) {
	t.Parallel() // it waits more than it works
	srv := server(t)
	storetest.RunCached(t, func(t *testing.T) idempotency.Store { return newStore(t, srv, srv.Client()) })
}

func TestNewRefusesTables(t *testing.T) {
	srv := server(t)
	c := srv.Client()
	ctx := context.Background()
	if _, err := dynamostore.New(nil, dynamostore.Options{}); err == nil {
		t.Fatal("New(nil) succeeded")
	}
	if _, err := dynamostore.New(c, dynamostore.Options{Table: "missing"}); err == nil || !strings.Contains(err.Error(), "CreateTable") {
		t.Fatalf("a missing table: %v, want an error that names CreateTable", err)
	}
	for _, tc := range []struct {
		name  string
		input *dynamodb.CreateTableInput
	}{
		{"other key", &dynamodb.CreateTableInput{
			AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("id"), AttributeType: types.ScalarAttributeTypeS}},
			KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("id"), KeyType: types.KeyTypeHash}},
		}},
		{"numeric key", &dynamodb.CreateTableInput{
			AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: types.ScalarAttributeTypeN}},
			KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash}},
		}},
		{"sort key", &dynamodb.CreateTableInput{
			AttributeDefinitions: []types.AttributeDefinition{
				{AttributeName: aws.String("pk"), AttributeType: types.ScalarAttributeTypeS},
				{AttributeName: aws.String("sk"), AttributeType: types.ScalarAttributeTypeS}},
			KeySchema: []types.KeySchemaElement{
				{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash},
				{AttributeName: aws.String("sk"), KeyType: types.KeyTypeRange}},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			table := "bad-" + uuid.NewString()
			tc.input.TableName, tc.input.BillingMode = aws.String(table), types.BillingModePayPerRequest
			if _, err := c.CreateTable(ctx, tc.input); err != nil {
				t.Fatal(err)
			}
			if _, err := dynamostore.New(c, dynamostore.Options{Table: table}); err == nil {
				t.Fatal("New accepted a table keyed otherwise")
			}
			if err := dynamostore.CreateTable(ctx, c, table); err == nil {
				t.Fatal("CreateTable accepted an existing table keyed otherwise")
			}
		})
	}
}

// New warns of a table whose items are never deleted (dynalite has no
// Time to Live) and of a retryer that makes more attempts than fit
// StoreTimeout; the SDK's default retryer draws no warning of its own.
func TestNewWarns(t *testing.T) {
	srv := server(t)
	table := "idem-" + uuid.NewString()
	if err := dynamostore.CreateTable(context.Background(), srv.Client(), table); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		attempts int
		retries  bool
	}{{0, false}, {1, false}, {4, false}, {5, true}, {10, true}} {
		var logged bytes.Buffer
		c := srv.Client(func(o *dynamodb.Options) { o.RetryMaxAttempts = tc.attempts })
		if _, err := dynamostore.New(c, dynamostore.Options{Table: table, Logger: slog.New(slog.NewTextHandler(&logged, nil))}); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(logged.String(), "Time to Live is not on") {
			t.Errorf("attempts %d: no warning of the missing TTL:\n%s", tc.attempts, logged.String())
		}
		if got := strings.Contains(logged.String(), "more attempts a call than the SDK's default"); got != tc.retries {
			t.Errorf("attempts %d: retryer warning %v, want %v:\n%s", tc.attempts, got, tc.retries, logged.String())
		}
	}
}

// CreateTable run by many replicas at once: each succeeds, one table.
func TestCreateTableConcurrently(t *testing.T) {
	srv := server(t)
	table := "idem-" + uuid.NewString()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Go(func() { errs <- dynamostore.CreateTable(context.Background(), srv.Client(), table) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}

// An item past its expiry that DynamoDB has not deleted yet (it deletes
// them late) is absent to every operation: a claim takes it over, and
// its former owner can neither extend nor complete it.
func TestExpiredItemIsAbsent(t *testing.T) {
	srv := server(t)
	s := newStore(t, srv, srv.Client())
	ctx := context.Background()
	claim := func(owner, fp string, lock time.Duration) *idempotency.Record {
		t.Helper()
		rec, err := s.Claim(ctx, idempotency.ClaimParams{Key: "k", Fingerprint: fp, Owner: owner, Lock: lock})
		if err != nil {
			t.Fatal(err)
		}
		return rec
	}
	if rec := claim("a", "fp1", 50*time.Millisecond); rec != nil {
		t.Fatalf("first claim: %+v", rec)
	}
	time.Sleep(100 * time.Millisecond)
	if err := s.Extend(ctx, idempotency.ExtendParams{Key: "k", Owner: "a", Lock: time.Minute}); !errors.Is(err, idempotency.ErrNotOwner) {
		t.Fatalf("extending an expired claim: %v, want ErrNotOwner", err)
	}
	if err := s.Complete(ctx, idempotency.CompleteParams{Key: "k", Owner: "a", Response: &idempotency.Response{Status: 201}, Retention: time.Minute}); !errors.Is(err, idempotency.ErrNotOwner) {
		t.Fatalf("completing an expired claim: %v, want ErrNotOwner", err)
	}
	if rec := claim("b", "fp2", time.Minute); rec != nil {
		t.Fatalf("claim of an expired key: %+v, want it taken", rec)
	}
	const retention = 500 * time.Millisecond
	completed := time.Now()
	must(t, s.Complete(ctx, idempotency.CompleteParams{Key: "k", Owner: "b", Response: &idempotency.Response{Status: 201}, Retention: retention}))
	// On a loaded machine the claim may come after the retention; only one
	// that came within it must be a replay.
	if rec := claim("c", "fp2", time.Minute); rec == nil || rec.Response == nil || rec.Response.Status != 201 {
		if time.Since(completed) < retention {
			t.Fatalf("replay within retention: %+v", rec)
		}
		t.Logf("the replay's claim came %v after the completion, past its retention: the rest is not checked", time.Since(completed))
		return
	}
	time.Sleep(retention + 100*time.Millisecond)
	if rec := claim("d", "fp3", time.Minute); rec != nil {
		t.Fatalf("claim past retention: %+v, want it taken", rec)
	}
}

// A completion sent again by its owner (the SDK resends one whose reply
// was lost) succeeds and keeps the response; another owner's does not.
func TestCompleteSentAgain(t *testing.T) {
	srv := server(t)
	s := newStore(t, srv, srv.Client())
	ctx := context.Background()
	if rec, err := s.Claim(ctx, idempotency.ClaimParams{Key: "k", Fingerprint: "fp", Owner: "a", Lock: time.Minute}); err != nil || rec != nil {
		t.Fatal(rec, err)
	}
	resp := &idempotency.Response{Status: 201, Body: []byte("charged")}
	for range 2 {
		must(t, s.Complete(ctx, idempotency.CompleteParams{Key: "k", Owner: "a", Response: resp, Retention: time.Minute}))
	}
	if err := s.Complete(ctx, idempotency.CompleteParams{Key: "k", Owner: "b", Response: &idempotency.Response{Status: 500}, Retention: time.Minute}); !errors.Is(err, idempotency.ErrNotOwner) {
		t.Fatalf("another owner's completion: %v, want ErrNotOwner", err)
	}
	must(t, s.Release(ctx, idempotency.ReleaseParams{Key: "k", Owner: "a"})) // completed: kept
	rec, err := s.Claim(ctx, idempotency.ClaimParams{Key: "k", Fingerprint: "fp", Owner: "c", Lock: time.Minute})
	if err != nil || rec == nil || rec.Response == nil || string(rec.Response.Body) != "charged" {
		t.Fatalf("replay: %+v, %v", rec, err)
	}
}

// Responses across the item's bound: one that fits is kept whole, byte
// for byte; a larger one is kept as TooLarge, never lost, so its replay
// answers 500 rather than charge again.
func TestResponseSizes(t *testing.T) {
	srv := server(t)
	s := newStore(t, srv, srv.Client())
	ctx := context.Background()
	for i, n := range []int{0, 1, 1000, dynamostore.MaxBody - 100, dynamostore.MaxBody + 1, 1 << 20} {
		key, owner := "size-"+uuid.NewString(), uuid.NewString()
		if rec, err := s.Claim(ctx, idempotency.ClaimParams{Key: key, Fingerprint: "fp", Owner: owner, Lock: time.Minute}); err != nil || rec != nil {
			t.Fatal(rec, err)
		}
		body := bytes.Repeat([]byte{byte(i), 0, 0xff}, n/3+1)[:n]
		must(t, s.Complete(ctx, idempotency.CompleteParams{Key: key, Owner: owner, Response: &idempotency.Response{Status: 200, Body: body}, Retention: time.Minute}))
		rec, err := s.Claim(ctx, idempotency.ClaimParams{Key: key, Fingerprint: "fp", Owner: "other", Lock: time.Minute})
		if err != nil || rec == nil || rec.Response == nil {
			t.Fatalf("%d bytes: replay %+v, %v", n, rec, err)
		}
		fits := n+2 <= dynamostore.MaxBody // the header is "{}"
		switch {
		case fits && (rec.Response.TooLarge || !bytes.Equal(rec.Response.Body, body)):
			t.Errorf("%d bytes: got %d bytes, too large %v; want the body back", n, len(rec.Response.Body), rec.Response.TooLarge)
		case !fits && (!rec.Response.TooLarge || len(rec.Response.Body) != 0 || rec.Response.Status != 200):
			t.Errorf("%d bytes: got %+v; want status 200 kept as too large, without its body", n, rec.Response)
		}
	}
}

// Keys, owners and fingerprints are opaque: any bytes a caller may pass
// are kept apart, and an empty one is refused.
func TestTokens(t *testing.T) {
	srv := server(t)
	s := newStore(t, srv, srv.Client())
	ctx := context.Background()
	for _, p := range []idempotency.ClaimParams{
		{Key: "", Fingerprint: "fp", Owner: "o", Lock: time.Minute},
		{Key: "k", Fingerprint: "", Owner: "o", Lock: time.Minute},
		{Key: "k", Fingerprint: "fp", Owner: "", Lock: time.Minute},
	} {
		if _, err := s.Claim(ctx, p); err == nil {
			t.Errorf("Claim(%+v) succeeded", p)
		}
	}
	for _, tok := range []string{"a|b", "#st", ":now", "ünïcode", strings.Repeat("x", 1000)} {
		if rec, err := s.Claim(ctx, idempotency.ClaimParams{Key: tok, Fingerprint: tok, Owner: tok, Lock: time.Minute}); err != nil || rec != nil {
			t.Fatalf("%q: %+v, %v", tok, rec, err)
		}
		rec, err := s.Claim(ctx, idempotency.ClaimParams{Key: tok, Fingerprint: "x", Owner: "other", Lock: time.Minute})
		if err != nil || rec == nil || rec.Fingerprint != tok {
			t.Fatalf("%q: the second claim got %+v, %v", tok, rec, err)
		}
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// With no table named, CreateTable and New both use DefaultTable, and the
// store works on it.
func TestDefaultTable(t *testing.T) {
	srv := dynamotest.Start(t) // a server of its own: DefaultTable is one name for all
	c := srv.Client()
	ctx := context.Background()
	must(t, dynamostore.CreateTable(ctx, c, ""))
	s, err := dynamostore.New(c, dynamostore.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if rec, err := s.Claim(ctx, idempotency.ClaimParams{Key: "k", Fingerprint: "fp", Owner: "o", Lock: time.Minute}); err != nil || rec != nil {
		t.Fatal(rec, err)
	}
	out, err := c.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(dynamostore.DefaultTable)})
	if err != nil || aws.ToInt64(out.Table.ItemCount) > 1 {
		t.Fatalf("DefaultTable: %v", err)
	}
	got, err := c.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(dynamostore.DefaultTable), ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "k"}}})
	if err != nil || got.Item == nil {
		t.Fatalf("the claim is not in DefaultTable: %v", err)
	}
}

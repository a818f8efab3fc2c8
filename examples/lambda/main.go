// Command lambda is a Go Lambda function behind API Gateway (an HTTP API,
// payload format 2.0) that charges once per Idempotency-Key: the
// idempotency middleware on DynamoDB (idempotency/dynamostore) around a
// plain http.Handler, adapted to Lambda's events by
// aws-lambda-go-api-proxy's httpadapter.
//
// Deploy it as a provided.al2023 function (GOOS=linux GOARCH=arm64
// go build -tags lambda.norpc -o bootstrap), with TABLE naming the
// records' table (dynamostore.CreateTable makes it, or declare it as the
// package doc of dynamostore says) and a role that may PutItem, GetItem,
// UpdateItem, DeleteItem, DescribeTable and DescribeTimeToLive on it.
//
// What Lambda changes:
//   - Build the middleware once, outside the handler, so that warm
//     invocations share its replay cache and its DynamoDB client.
//   - An environment is frozen between invocations: work the middleware
//     leaves for after its answer (releasing a claim whose reply was
//     lost) may wait for the next invocation. Such a key is held until
//     LockTimeout, and its retry meets 409 with a Retry-After until then;
//     nothing runs twice. So LockTimeout is set just past the function's
//     own timeout: a function Lambda killed at its timeout blocks its key
//     no longer than that.
//   - Lambda runs concurrent invocations in separate environments: a
//     client's retry that arrives while the first still runs is answered
//     409 by the claim in DynamoDB, not by anything in memory.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"net/http"
	"os"
	"sync/atomic"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/awslabs/aws-lambda-go-api-proxy/httpadapter"

	"github.com/retryhttp/retryhttp/idempotency"
	"github.com/retryhttp/retryhttp/idempotency/dynamostore"
)

// functionTimeout is the function's timeout as deployed; LockTimeout is
// just past it.
const functionTimeout = 10 * time.Second

func main() {
	cfg, err := config.LoadDefaultConfig(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	h, err := newHandler(dynamodb.NewFromConfig(cfg), os.Getenv("TABLE"), &ledger{})
	if err != nil {
		log.Fatal(err)
	}
	lambda.Start(httpadapter.NewV2(h).ProxyWithContext)
}

// newHandler is the function's http.Handler: POST /charges, once per
// Idempotency-Key, its records in table.
func newHandler(client *dynamodb.Client, table string, l *ledger) (http.Handler, error) {
	store, err := dynamostore.New(client, dynamostore.Options{Table: table})
	if err != nil {
		return nil, err
	}
	m, err := idempotency.New(idempotency.Options{
		Store:            store,
		LockTimeout:      functionTimeout + 2*time.Second,
		RequireKey:       true,
		MaxResponseBytes: dynamostore.MaxBody,
		CacheEntries:     1000,
	})
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("POST /charges", m.Handler(l))
	return mux, nil
}

// ledger is the side effect: a charge, counted.
type ledger struct{ charges atomic.Int64 }

func (l *ledger) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var order struct {
		Amount int `json:"amount"`
	}
	if err := json.NewDecoder(r.Body).Decode(&order); err != nil || order.Amount <= 0 {
		http.Error(w, "want a JSON body with a positive amount", http.StatusBadRequest)
		return
	}
	n := l.charges.Add(1)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	fmt.Fprintf(w, `{"charge":"ch_%d","amount":%d}`, n, order.Amount)
}

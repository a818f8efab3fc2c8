package dynamostore_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/retryhttp/retryhttp/idempotency"
	"github.com/retryhttp/retryhttp/shared/dynamotest"
)

// BenchmarkClaim: the store's claim of a new key and its completion, each
// one request, against the floor's requests on the same dynalite: a
// PutItem conditional on attribute_not_exists alone, and a plain PutItem.
// The requests are as many; what differs is the work of the engine on
// the store's conditions (dynalite parses each expression in JavaScript).
//
//	go test -run '^$' -bench Claim -benchtime 500x ./idempotency/dynamostore
func BenchmarkClaim(b *testing.B) {
	srv := dynamotest.Start(b)
	c := srv.Client()
	s := newStore(b, srv, c)
	table := aws.String(tables[s])
	ctx := context.Background()
	item := func(k string) map[string]types.AttributeValue {
		return map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: k}}
	}
	run := 0 // each run of a sub-benchmark on keys of its own
	next := func(prefix string, i int) string { return prefix + strconv.Itoa(run) + "-" + strconv.Itoa(i) }
	b.Run("store claim new", func(b *testing.B) {
		run++
		for i := range b.N {
			if _, err := s.Claim(ctx, idempotency.ClaimParams{Key: next("k", i), Fingerprint: "fp", Owner: "o", Lock: time.Minute}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("store complete", func(b *testing.B) {
		run++
		b.StopTimer()
		for i := range b.N {
			if _, err := s.Claim(ctx, idempotency.ClaimParams{Key: next("k", i), Fingerprint: "fp", Owner: "o", Lock: time.Minute}); err != nil {
				b.Fatal(err)
			}
		}
		b.StartTimer()
		for i := range b.N {
			if err := s.Complete(ctx, idempotency.CompleteParams{Key: next("k", i), Owner: "o", Response: &idempotency.Response{Status: 201, Body: []byte(`{"id":1}`)}, Retention: time.Minute}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("floor conditional put", func(b *testing.B) {
		run++
		for i := range b.N {
			if _, err := c.PutItem(ctx, &dynamodb.PutItemInput{TableName: table, Item: item(next("f", i)), ConditionExpression: aws.String("attribute_not_exists(pk)")}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("floor put", func(b *testing.B) {
		run++
		for i := range b.N {
			if _, err := c.PutItem(ctx, &dynamodb.PutItemInput{TableName: table, Item: item(next("f", i))}); err != nil {
				b.Fatal(err)
			}
		}
	})
}

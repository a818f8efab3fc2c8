package main

import (
	"context"
	"net/http"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/retryhttp/retryhttp/idempotency/dynamostore"
)

// dynamoBackend: the floor is a PutItem conditional on the key's absence
// then a PutItem of the response, for a new key, and a strongly
// consistent GetItem for a replay, on the table the store uses.
func dynamoBackend(ctx context.Context, endpoint string, conns int, child bool) (*backend, error) {
	count := &counter{}
	hc := &http.Client{Transport: countingTransport{&http.Transport{MaxIdleConnsPerHost: conns, MaxConnsPerHost: conns}, count}}
	client := dynamodb.New(dynamodb.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(endpoint),
		Credentials:  credentials.NewStaticCredentialsProvider("bench", "bench", ""),
		HTTPClient:   hc,
	})
	const table = "serverbench_idempotency"
	if !child {
		client.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(table)})
		if err := dynamostore.CreateTable(ctx, client, table); err != nil {
			return nil, err
		}
	}
	s, err := dynamostore.New(client, dynamostore.Options{Table: table})
	if err != nil {
		return nil, err
	}
	key := func(k string) map[string]types.AttributeValue {
		return map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: k}}
	}
	return &backend{
		name:  "dynamodb",
		store: s,
		count: count,
		floorNew: func(ctx context.Context, k string, resp []byte) error {
			k = "floor:" + k
			if _, err := client.PutItem(ctx, &dynamodb.PutItemInput{
				TableName:           aws.String(table),
				Item:                key(k),
				ConditionExpression: aws.String("attribute_not_exists(pk)"),
			}); err != nil {
				return err
			}
			item := key(k)
			item["body"] = &types.AttributeValueMemberB{Value: resp}
			_, err := client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: item})
			return err
		},
		floorRead: func(ctx context.Context, k string) error {
			_, err := client.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: key(k), ConsistentRead: aws.Bool(true)})
			return err
		},
		close: func() {
			if !child {
				client.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(table)})
			}
			hc.CloseIdleConnections()
		},
	}, nil
}

// countingTransport counts each HTTP request, one DynamoDB operation and
// one round trip each.
type countingTransport struct {
	base http.RoundTripper
	c    *counter
}

func (t countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	t.c.trips.Add(1)
	t.c.commands.Add(1)
	return t.base.RoundTrip(r)
}

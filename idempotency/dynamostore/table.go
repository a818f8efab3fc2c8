package dynamostore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
)

// CreateTable creates the table a Store needs ("" means DefaultTable),
// on-demand, waits until it is ACTIVE, and turns Time to Live on for its
// ttl attribute. A table that exists already is checked as New checks it
// and otherwise left as it is, so CreateTable is safe to run from every
// replica at start-up. An engine without Time to Live (dynalite, for one)
// keeps expired items; the Store reads them as absent all the same.
func CreateTable(ctx context.Context, client *dynamodb.Client, table string) error {
	if table == "" {
		table = DefaultTable
	}
	_, err := client.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String(table),
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String(keyAttr), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String(keyAttr), KeyType: types.KeyTypeHash}},
		BillingMode:          types.BillingModePayPerRequest,
	})
	var inUse *types.ResourceInUseException
	if err != nil && !errors.As(err, &inUse) {
		return fmt.Errorf("dynamostore: create table %s: %w", table, err)
	}
	// A new table is ACTIVE in seconds; the waiter's own first pause is 20.
	waiter := dynamodb.NewTableExistsWaiter(client, func(o *dynamodb.TableExistsWaiterOptions) {
		o.MinDelay, o.MaxDelay = 100*time.Millisecond, 5*time.Second
	})
	if err := waiter.Wait(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)}, 2*time.Minute); err != nil {
		return fmt.Errorf("dynamostore: table %s: %w", table, err)
	}
	if err := checkTable(ctx, client, table); err != nil {
		return err
	}
	if on, err := ttlOn(ctx, client, table); err == nil && on {
		return nil
	}
	_, err = client.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{
		TableName:               aws.String(table),
		TimeToLiveSpecification: &types.TimeToLiveSpecification{AttributeName: aws.String(ttlAttr), Enabled: aws.Bool(true)},
	})
	var api smithy.APIError
	if err != nil && !(errors.As(err, &api) && api.ErrorCode() == "UnknownOperationException") {
		return fmt.Errorf("dynamostore: time to live on %s: %w", table, err)
	}
	return nil
}

// checkTable refuses a table that is missing, or keyed otherwise than a
// Store writes it.
func checkTable(ctx context.Context, client *dynamodb.Client, table string) error {
	out, err := client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	if err != nil {
		return fmt.Errorf("dynamostore: table %s: %w (CreateTable makes it)", table, err)
	}
	keys := out.Table.KeySchema
	if len(keys) != 1 || aws.ToString(keys[0].AttributeName) != keyAttr || keys[0].KeyType != types.KeyTypeHash {
		return fmt.Errorf("dynamostore: table %s is not keyed by a partition key %q alone", table, keyAttr)
	}
	for _, a := range out.Table.AttributeDefinitions {
		if aws.ToString(a.AttributeName) == keyAttr && a.AttributeType != types.ScalarAttributeTypeS {
			return fmt.Errorf("dynamostore: table %s: partition key %q is of type %s, want S", table, keyAttr, a.AttributeType)
		}
	}
	return nil
}

// ttlOn reports whether Time to Live is on (or being turned on) for the
// ttl attribute.
func ttlOn(ctx context.Context, client *dynamodb.Client, table string) (bool, error) {
	out, err := client.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(table)})
	if err != nil {
		return false, err
	}
	d := out.TimeToLiveDescription
	if d == nil || aws.ToString(d.AttributeName) != ttlAttr {
		return false, nil
	}
	return d.TimeToLiveStatus == types.TimeToLiveStatusEnabled || d.TimeToLiveStatus == types.TimeToLiveStatusEnabling, nil
}

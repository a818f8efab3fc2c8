// Package dynamostore keeps idempotency records in Amazon DynamoDB, the
// store AWS services and Lambda functions already run.
//
// Every operation is one request, atomic on DynamoDB and conditional on
// the caller's owner token: a claim is a PutItem whose condition holds
// only where the key is absent, expired, or already the caller's
// (attribute_not_exists, or an expiry past); extending, completing and
// releasing are an UpdateItem or a DeleteItem conditional on the owner. A
// claim that finds the key live reads it back, strongly consistent (or
// takes it from the failed condition, ReturnValuesOnConditionCheckFailure,
// where the engine returns it). A new key costs two writes, a replay one
// failed conditional write and, at most, one consistent read.
//
// Time. DynamoDB has no clock a condition can read, so an expiry is the
// Unix milliseconds of the writer's clock, and a claim compares it with
// its own: the clocks of the processes that share a table must agree to
// well within LockTimeout (NTP, or the Amazon Time Sync Service, keeps
// them within milliseconds). Records carry a second attribute, ttl, in
// Unix seconds for DynamoDB's Time to Live; DynamoDB deletes expired
// items late (within days), so every read treats an item past its expiry
// as absent, and TTL only reclaims the space.
//
// The table: a partition key pk of type S, no sort key, and Time to Live
// on the attribute ttl. CreateTable makes one (for tests and a first run);
// in CloudFormation or Terraform declare the same: AttributeDefinitions
// pk/S, KeySchema pk/HASH, TimeToLiveSpecification ttl, enabled. On-demand
// capacity (PAY_PER_REQUEST) suits most services;
// with provisioned capacity a throttled claim
// (ProvisionedThroughputExceededException) answers 503 and the handler
// does not run.
//
// The client. Every operation is safe to send again (a claim, a
// completion, an extension and a release repeated by the same owner do
// what the first did), so the SDK's default retryer may stay:
// it absorbs a throttled or lost request within the middleware's
// StoreTimeout, which bounds every call with the retries inside it. More
// attempts only wait past StoreTimeout, where the middleware answers 503
// anyway, while each adds load to a table that is already throttling: New
// warns of a retryer that makes more attempts than the default.
//
// An item holds at most 400 KB. A response too large for it (the
// middleware's MaxResponseBytes is 1 MiB by default) is stored without its
// body, as Response.TooLarge: its effect is recorded, and replays answer
// 500 rather than run the handler again. Set MaxResponseBytes to
// MaxBody to have the middleware do so itself.
package dynamostore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/retryhttp/retryhttp/idempotency"
)

// DefaultTable is the table New uses when Options.Table is "".
const DefaultTable = "idempotency_keys"

// MaxBody is the largest response body (with its header) a record keeps:
// DynamoDB's 400 KB item, less room for the other attributes.
const MaxBody = 380 << 10

// sdkAttempts is the attempts a call makes with the SDK's default
// retryer for DynamoDB: the most New accepts without a warning.
var sdkAttempts = attempts(dynamodb.New(dynamodb.Options{}))

// Options configure New. The zero value uses DefaultTable and
// slog.Default().
type Options struct {
	// Table is the table's name; "" means DefaultTable.
	Table string
	// Logger is where the Store reports responses stored without their
	// body, and New its warnings; nil means slog.Default().
	Logger *slog.Logger
}

// Store is an idempotency.Store on DynamoDB. It is safe for concurrent
// use.
type Store struct {
	client *dynamodb.Client
	table  *string
	logger *slog.Logger
}

// New returns a Store on the table of o. It asks DynamoDB for the table
// (one DescribeTable and one DescribeTimeToLive, within a few seconds):
// it refuses a table that is missing or keyed otherwise than Table says,
// and warns of one whose TTL is off or on another attribute (expired
// records are then never deleted, though still read as absent), and of a
// client whose retryer makes more attempts than the SDK's default.
func New(client *dynamodb.Client, o Options) (*Store, error) {
	if client == nil {
		return nil, errors.New("dynamostore: nil client")
	}
	if o.Table == "" {
		o.Table = DefaultTable
	}
	s := &Store{client: client, table: aws.String(o.Table), logger: o.Logger}
	if s.logger == nil {
		s.logger = slog.Default()
	}
	ctx, cancel := context.WithTimeout(context.Background(), describeTimeout)
	defer cancel()
	if err := checkTable(ctx, client, o.Table); err != nil {
		return nil, err
	}
	if on, err := ttlOn(ctx, client, o.Table); err != nil || !on {
		s.logger.LogAttrs(ctx, slog.LevelWarn, "dynamostore: Time to Live is not on for the attribute "+ttlAttr+
			"; expired records are read as absent but never deleted (UpdateTimeToLive, or CreateTable, turns it on)",
			slog.String("table", o.Table), slog.Any("error", err))
	}
	if n := attempts(client); n > sdkAttempts {
		s.logger.LogAttrs(ctx, slog.LevelWarn, "dynamostore: the client's retryer makes more attempts a call than the SDK's default: "+
			"they wait past the middleware's StoreTimeout, which answers 503 anyway, and each adds load to a throttled table",
			slog.Int("attempts", n), slog.Int("default", sdkAttempts))
	}
	return s, nil
}

// describeTimeout bounds New's questions to DynamoDB.
const describeTimeout = 10 * time.Second

// attempts is how many attempts the client's retryer makes a call.
func attempts(c *dynamodb.Client) int {
	o := c.Options()
	if o.Retryer != nil {
		return o.Retryer.MaxAttempts()
	}
	return o.RetryMaxAttempts
}

// The item's attributes. Names go through ExpressionAttributeNames, so
// DynamoDB's reserved words need no care.
const (
	keyAttr      = "pk"        // S: the scoped, hashed key
	stateAttr    = "state"     // S: inFlight or done
	ownerAttr    = "owner"     // S: the owner token of the claim (kept once done, so a completion sent again succeeds)
	fpAttr       = "fp"        // S: the request's fingerprint
	expiresAttr  = "expires"   // N: Unix milliseconds of the writer's clock
	ttlAttr      = "ttl"       // N: Unix seconds, for DynamoDB's Time to Live
	statusAttr   = "status"    // N
	headerAttr   = "header"    // S: the header as JSON
	bodyAttr     = "body"      // B: absent when empty
	tooLargeAttr = "too_large" // BOOL
)

const (
	inFlight = "f"
	done     = "d"
)

// names maps each #name of the expressions to its attribute.
var names = map[string]string{
	"#pk": keyAttr, "#st": stateAttr, "#ow": ownerAttr, "#fp": fpAttr, "#exp": expiresAttr,
	"#ttl": ttlAttr, "#status": statusAttr, "#hdr": headerAttr, "#body": bodyAttr, "#tl": tooLargeAttr,
}

// namesFor returns the entries of names that exprs use: DynamoDB refuses
// a name that no expression uses.
func namesFor(exprs ...string) map[string]string {
	m := make(map[string]string, len(names))
	for _, e := range exprs {
		for i := 0; i < len(e); i++ {
			if e[i] != '#' {
				continue
			}
			j := i + 1
			for j < len(e) && (e[j] >= 'a' && e[j] <= 'z') {
				j++
			}
			m[e[i:j]] = names[e[i:j]]
			i = j - 1
		}
	}
	return m
}

// The conditions: a claim takes a key that is absent, expired, or already
// its owner's in flight; every other write acts only on its owner's live
// claim (a completion also on its owner's completed record, so that one
// sent again succeeds).
const (
	claimCond    = "attribute_not_exists(#pk) OR #exp <= :now OR (#st = :f AND #ow = :ow)"
	ownLiveCond  = "#st = :f AND #ow = :ow AND #exp > :now"
	completeCond = "#ow = :ow AND ((#st = :f AND #exp > :now) OR #st = :d)"
	releaseCond  = "#st = :f AND #ow = :ow"
)

// The updates, and the names each operation's expressions use, made
// once: the SDK only reads them.
const (
	extendUpdate   = "SET #exp = :exp, #ttl = :ttl"
	completeUpdate = "SET #st = :d, #exp = :exp, #ttl = :ttl, #status = :status, #hdr = :hdr, #tl = :tl"
)

var (
	claimNames    = namesFor(claimCond)
	extendNames   = namesFor(extendUpdate, ownLiveCond)
	completeNames = namesFor(completeUpdate, "#body", completeCond)
	releaseNames  = namesFor(releaseCond)
)

func str(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
func num(n int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(n, 10)}
}

// expiry returns an expiry d from now as the two attributes: Unix
// milliseconds, and the Unix second at or after it.
func expiry(now time.Time, d time.Duration) (ms, secs int64) {
	ms = now.Add(d).UnixMilli()
	return ms, (ms + 999) / 1000
}

func checkToken(what, v string) error {
	if v == "" {
		return fmt.Errorf("dynamostore: empty %s", what)
	}
	return nil
}

// Claim implements idempotency.Store.
func (s *Store) Claim(ctx context.Context, p idempotency.ClaimParams) (*idempotency.Record, error) {
	for _, c := range [][2]string{{"key", p.Key}, {"fingerprint", p.Fingerprint}, {"owner token", p.Owner}} {
		if err := checkToken(c[0], c[1]); err != nil {
			return nil, err
		}
	}
	// A live item can expire, or be released, between the failed
	// condition and the read; then the key is asked for again.
	for range 5 {
		now := time.Now()
		ms, secs := expiry(now, p.Lock)
		_, err := s.client.PutItem(ctx, &dynamodb.PutItemInput{
			TableName: s.table,
			Item: map[string]types.AttributeValue{
				keyAttr: str(p.Key), stateAttr: str(inFlight), ownerAttr: str(p.Owner), fpAttr: str(p.Fingerprint),
				expiresAttr: num(ms), ttlAttr: num(secs),
			},
			ConditionExpression:                 aws.String(claimCond),
			ExpressionAttributeNames:            claimNames,
			ExpressionAttributeValues:           map[string]types.AttributeValue{":now": num(now.UnixMilli()), ":f": str(inFlight), ":ow": str(p.Owner)},
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		})
		var failed *types.ConditionalCheckFailedException
		switch {
		case err == nil:
			return nil, nil // taken, or ours already: a repeated claim
		case !errors.As(err, &failed):
			return nil, fmt.Errorf("dynamostore: claim: %w", err)
		}
		item := failed.Item
		if item == nil { // the engine did not return it: read it
			out, err := s.client.GetItem(ctx, &dynamodb.GetItemInput{
				TableName: s.table, Key: map[string]types.AttributeValue{keyAttr: str(p.Key)}, ConsistentRead: aws.Bool(true),
			})
			if err != nil {
				return nil, fmt.Errorf("dynamostore: claim: %w", err)
			}
			item = out.Item
		}
		rec, live, err := decode(item, time.Now())
		if err != nil {
			return nil, fmt.Errorf("dynamostore: malformed record under %s: %w", p.Key, err)
		}
		if live {
			return rec, nil
		}
	}
	return nil, errors.New("dynamostore: claim: key changed hands too often; retry")
}

// Extend implements idempotency.Store.
func (s *Store) Extend(ctx context.Context, p idempotency.ExtendParams) error {
	now := time.Now()
	ms, secs := expiry(now, p.Lock)
	err := s.update(ctx, p.Key, extendUpdate, ownLiveCond, extendNames, map[string]types.AttributeValue{
		":exp": num(ms), ":ttl": num(secs), ":now": num(now.UnixMilli()), ":f": str(inFlight), ":ow": str(p.Owner),
	})
	return s.owned("extend", err)
}

// Complete implements idempotency.Store.
func (s *Store) Complete(ctx context.Context, p idempotency.CompleteParams) error {
	resp := p.Response
	header := []byte("{}")
	if resp.Header != nil {
		var err error
		if header, err = idempotency.MarshalHeader(resp.Header); err != nil {
			return fmt.Errorf("dynamostore: complete: %w", err)
		}
	}
	body, tooLarge := resp.Body, resp.TooLarge
	if len(body)+len(header) > MaxBody {
		body, tooLarge = nil, true
		s.logger.LogAttrs(ctx, slog.LevelWarn, "dynamostore: a response is too large for a DynamoDB item and is stored without its body; "+
			"its replays answer 500 (set the middleware's MaxResponseBytes to dynamostore.MaxBody to refuse such responses first)",
			slog.Int("bytes", len(resp.Body)+len(header)))
	}
	now := time.Now()
	ms, secs := expiry(now, p.Retention)
	values := map[string]types.AttributeValue{
		":d": str(done), ":exp": num(ms), ":ttl": num(secs), ":status": num(int64(resp.Status)),
		":hdr": str(string(header)), ":tl": &types.AttributeValueMemberBOOL{Value: tooLarge},
		":now": num(now.UnixMilli()), ":f": str(inFlight), ":ow": str(p.Owner),
	}
	update := completeUpdate + ", #body = :body"
	if len(body) > 0 {
		values[":body"] = &types.AttributeValueMemberB{Value: body}
	} else {
		update = completeUpdate + " REMOVE #body"
	}
	err := s.update(ctx, p.Key, update, completeCond, completeNames, values)
	return s.owned("complete", err)
}

// Release implements idempotency.Store.
func (s *Store) Release(ctx context.Context, p idempotency.ReleaseParams) error {
	_, err := s.client.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName:                 s.table,
		Key:                       map[string]types.AttributeValue{keyAttr: str(p.Key)},
		ConditionExpression:       aws.String(releaseCond),
		ExpressionAttributeNames:  releaseNames,
		ExpressionAttributeValues: map[string]types.AttributeValue{":f": str(inFlight), ":ow": str(p.Owner)},
	})
	var failed *types.ConditionalCheckFailedException
	if err != nil && !errors.As(err, &failed) {
		return fmt.Errorf("dynamostore: release: %w", err)
	}
	return nil // released, or not ours to release
}

// update runs an UpdateItem of key, conditional on cond.
func (s *Store) update(ctx context.Context, key, update, cond string, names map[string]string, values map[string]types.AttributeValue) error {
	_, err := s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 s.table,
		Key:                       map[string]types.AttributeValue{keyAttr: str(key)},
		UpdateExpression:          aws.String(update),
		ConditionExpression:       aws.String(cond),
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: values,
	})
	return err
}

// owned maps a conditional write's error: a failed condition is
// idempotency.ErrNotOwner.
func (s *Store) owned(op string, err error) error {
	var failed *types.ConditionalCheckFailedException
	switch {
	case err == nil:
		return nil
	case errors.As(err, &failed):
		return idempotency.ErrNotOwner
	}
	return fmt.Errorf("dynamostore: %s: %w", op, err)
}

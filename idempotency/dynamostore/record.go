package dynamostore

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/retryhttp/retryhttp/idempotency"
)

// decode reads an item as the record a claim returns, and whether it is
// live at now: an absent item, or one past its expiry (DynamoDB deletes
// expired items late), is not.
func decode(item map[string]types.AttributeValue, now time.Time) (*idempotency.Record, bool, error) {
	if item == nil {
		return nil, false, nil
	}
	exp, err := number(item, expiresAttr)
	if err != nil {
		return nil, false, err
	}
	expires := time.UnixMilli(exp)
	if !expires.After(now) {
		return nil, false, nil
	}
	state, err := text(item, stateAttr)
	if err != nil {
		return nil, false, err
	}
	fp, err := text(item, fpAttr)
	if err != nil {
		return nil, false, err
	}
	rec := &idempotency.Record{Fingerprint: fp, Expires: expires}
	switch state {
	case inFlight:
		return rec, true, nil
	case done:
	default:
		return nil, false, fmt.Errorf("unknown state %q", state)
	}
	status, err := number(item, statusAttr)
	if err != nil {
		return nil, false, err
	}
	resp := &idempotency.Response{Status: int(status)}
	if h, err := text(item, headerAttr); err != nil {
		return nil, false, err
	} else if h != "{}" {
		if resp.Header, err = idempotency.UnmarshalHeader([]byte(h)); err != nil {
			return nil, false, fmt.Errorf("header: %w", err)
		}
	}
	if b, ok := item[bodyAttr].(*types.AttributeValueMemberB); ok && len(b.Value) > 0 {
		resp.Body = b.Value
	}
	if tl, ok := item[tooLargeAttr].(*types.AttributeValueMemberBOOL); ok {
		resp.TooLarge = tl.Value
	}
	rec.Response = resp
	return rec, true, nil
}

func text(item map[string]types.AttributeValue, name string) (string, error) {
	v, ok := item[name].(*types.AttributeValueMemberS)
	if !ok {
		return "", errors.New("no " + name)
	}
	return v.Value, nil
}

func number(item map[string]types.AttributeValue, name string) (int64, error) {
	v, ok := item[name].(*types.AttributeValueMemberN)
	if !ok {
		return 0, errors.New("no " + name)
	}
	n, err := strconv.ParseInt(v.Value, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", name, err)
	}
	return n, nil
}

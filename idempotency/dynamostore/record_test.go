package dynamostore

import (
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// An item past its expiry is no record, whatever its state: DynamoDB's
// TTL deletes it late, and a claim that read it as live would answer 409
// (in flight) or replay a response whose retention is over.
func TestDecodeTreatsAnExpiredItemAsAbsent(t *testing.T) {
	now := time.UnixMilli(1_800_000_000_000)
	item := func(state string, expires time.Time) map[string]types.AttributeValue {
		return map[string]types.AttributeValue{
			keyAttr: str("k"), stateAttr: str(state), ownerAttr: str("o"), fpAttr: str("fp"),
			expiresAttr: num(expires.UnixMilli()), statusAttr: num(201), headerAttr: str("{}"),
		}
	}
	for _, tc := range []struct {
		state   string
		expires time.Duration // from now
		live    bool
	}{
		{inFlight, time.Minute, true},
		{inFlight, time.Millisecond, true},
		{inFlight, 0, false},
		{inFlight, -time.Millisecond, false},
		{inFlight, -time.Hour, false},
		{done, 24 * time.Hour, true},
		{done, 0, false},
		{done, -time.Second, false},
	} {
		rec, live, err := decode(item(tc.state, now.Add(tc.expires)), now)
		if err != nil {
			t.Fatalf("%s expiring in %v: %v", tc.state, tc.expires, err)
		}
		if live != tc.live || (rec != nil) != tc.live {
			t.Errorf("%s expiring in %v: live %v, record %v; want live %v", tc.state, tc.expires, live, rec, tc.live)
		}
		if live && tc.state == done && (rec.Response == nil || rec.Response.Status != 201) {
			t.Errorf("%s: response %+v", tc.state, rec.Response)
		}
	}
	if rec, live, err := decode(nil, now); rec != nil || live || err != nil {
		t.Errorf("no item: %v %v %v", rec, live, err)
	}
}

package storetest

import (
	"net/http"
	"testing"
	"time"

	"github.com/retryhttp/retryhttp/idempotency"
)

// RunLostReply runs a claim whose reply is lost on the wire: lose arms
// the loss of the next reply (a fault proxy's LoseNextReply). resent says
// whether the store's client sends a command again after a lost reply
// (go-redis's and the AWS SDK's retries): then the claim sent again finds
// the request's own and the handler runs at once, 201, no 409. Without,
// the request is answered 503 and its claim released, so that the retry
// runs at once instead of meeting 409 until LockTimeout (a minute here).
// Either way the charge happens once.
func RunLostReply(t *testing.T, s idempotency.Store, lose func(), resent bool) {
	t.Helper()
	c := &charges{}
	url := serve(t, s, c, idempotency.Options{LockTimeout: time.Minute})
	lose()
	first := post(t, url, "lost-1", "", `{"amount":1}`)
	switch {
	case resent && first.status != http.StatusCreated:
		t.Fatalf("%d %s, want 201: the claim sent again is the request's own", first.status, first.body)
	case !resent && first.status != http.StatusServiceUnavailable:
		t.Fatalf("%d %s, want 503", first.status, first.body)
	}
	// The release runs after the answer, within StoreTimeout: a retry
	// before it is told 409, as a client that retries at once would be.
	r := post(t, url, "lost-1", "", `{"amount":1}`)
	for deadline := time.Now().Add(5 * time.Second); r.status == http.StatusConflict && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
		r = post(t, url, "lost-1", "", `{"amount":1}`)
	}
	if r.status != http.StatusCreated || c.count() != 1 {
		t.Fatalf("retry: %d %s, %d charges; want 201 and 1 charge", r.status, r.body, c.count())
	}
}

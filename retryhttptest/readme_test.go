package retryhttptest_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/retryhttp/retryhttp"
	"github.com/retryhttp/retryhttp/retryhttptest"
)

// TestREADMEScenario is the README's "Testing your client's retries"
// example, run as written, except that the last assertion is expected to
// fail: without the idempotency middleware the server charges twice.
func TestREADMEScenario(t *testing.T) {
	srv := retryhttptest.Start(t, retryhttptest.Script{
		"/items":   {retryhttptest.Status(503), retryhttptest.Status(503), retryhttptest.Status(200)},
		"/limited": {retryhttptest.RetryAfter(429, "1"), retryhttptest.Status(200)},
		"/slow":    {retryhttptest.Status(200).After(time.Minute), retryhttptest.Status(200)},
		"/charges": {retryhttptest.DropResponse(), retryhttptest.Forward()},
	}, retryhttptest.Options{})
	tr := &retryhttp.Transport{
		Base:                 srv.Transport(),
		InjectIdempotencyKey: true,
		Policy:               retryhttp.Policy{AttemptTimeout: 100 * time.Millisecond},
	}
	t.Cleanup(tr.CloseIdleConnections)
	client := &http.Client{Transport: tr}

	for _, path := range []string{"/items", "/limited", "/slow"} {
		resp, err := client.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	resp, err := client.Post(srv.URL+"/charges", "application/json", strings.NewReader(`{"amount":100}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()

	retryhttptest.AssertAttempts(t, srv.RequestsTo("/items"), 3)
	retryhttptest.AssertRetryAfterRespected(t, srv.RequestsTo("/limited"))
	retryhttptest.AssertAttempts(t, srv.RequestsTo("/slow"), 2)
	retryhttptest.AssertSameIdempotencyKey(t, srv.RequestsTo("/charges"))
	if srv.Effects.Total() != 2 {
		t.Errorf("effects = %d, want 2 (the key is ignored without the middleware)", srv.Effects.Total())
	}
}

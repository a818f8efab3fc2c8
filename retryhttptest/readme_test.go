package retryhttptest_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/retryhttp/retryhttp"
	"github.com/retryhttp/retryhttp/idempotency"
	"github.com/retryhttp/retryhttp/retryhttptest"
)

// readmeScenario is the example of docs/testing.md,
// with the errors it leaves out checked. handler wraps the counted effect.
func readmeScenario(t *testing.T, effects *retryhttptest.Effects, handler func(http.Handler) http.Handler) *retryhttptest.Server {
	srv := retryhttptest.Start(t, retryhttptest.Script{
		"/items":   {retryhttptest.Status(503), retryhttptest.Status(503), retryhttptest.Status(200)},
		"/limited": {retryhttptest.RetryAfter(429, "1"), retryhttptest.Status(200)},
		"/slow":    {retryhttptest.Status(200).After(time.Minute), retryhttptest.Status(200)},
		"/charges": {retryhttptest.DropResponse(), retryhttptest.Forward()},
	}, retryhttptest.Options{Handler: handler(effects.Handler(201, `{"id":1}`))})
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
	return srv
}

func TestREADMEScenario(t *testing.T) {
	effects := &retryhttptest.Effects{}
	mw, err := idempotency.New(idempotency.Options{})
	if err != nil {
		t.Fatal(err)
	}
	srv := readmeScenario(t, effects, mw.Handler)
	retryhttptest.AssertAttempts(t, srv.RequestsTo("/items"), 3)
	retryhttptest.AssertRetryAfterRespected(t, srv.RequestsTo("/limited"))
	retryhttptest.AssertAttempts(t, srv.RequestsTo("/slow"), 2)
	retryhttptest.AssertSameIdempotencyKey(t, srv.RequestsTo("/charges"))
	effects.AssertExactlyOnce(t, 1)
}

func TestREADMEScenarioWithoutMiddlewareChargesTwice(t *testing.T) {
	effects := &retryhttptest.Effects{}
	readmeScenario(t, effects, func(h http.Handler) http.Handler { return h })
	if effects.Total() != 2 {
		t.Errorf("effects = %d, want 2: without the middleware the retried POST charges again", effects.Total())
	}
}

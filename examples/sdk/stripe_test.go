package sdk

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stripe/stripe-go/v82"

	"github.com/retryhttp/retryhttp"
)

// fakeStripe answers POST /v1/charges: a 503 first, then the charge. It
// records each attempt's Idempotency-Key.
func fakeStripe(failures int32) (*httptest.Server, *[]string) {
	var mu sync.Mutex
	var keys []string
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		mu.Lock()
		keys = append(keys, r.Header.Get("Idempotency-Key"))
		mu.Unlock()
		if n.Add(1) <= failures {
			// A load balancer's 503: not a Stripe error, so stripe-go
			// retries it on its own when its retries are on.
			http.Error(w, "Service Unavailable", 503)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"ch_123","object":"charge","amount":100,"currency":"usd"}`)
	}))
	return srv, &keys
}

// stripe-go: its own retries off (MaxNetworkRetries 0), the Transport
// retries. stripe-go sends an Idempotency-Key with every POST, so the
// Transport retries the charge safely, under that one key.
func Example_stripe() {
	srv, keys := fakeStripe(1)
	defer srv.Close()

	client := &http.Client{Transport: &retryhttp.Transport{Policy: retryhttp.Policy{BaseDelay: 10 * time.Millisecond}}}
	sc := stripe.NewClient("sk_test_123", stripe.WithBackends(stripe.NewBackendsWithConfig(&stripe.BackendConfig{
		URL:               stripe.String(srv.URL),
		HTTPClient:        client,
		MaxNetworkRetries: stripe.Int64(0), // one retry layer: the Transport's
		LeveledLogger:     &stripe.LeveledLogger{Level: stripe.LevelNull},
	})))
	ch, err := sc.V1Charges.Create(context.Background(), &stripe.ChargeCreateParams{Amount: stripe.Int64(100), Currency: stripe.String("usd")})
	if err != nil {
		panic(err)
	}
	fmt.Println("charge:", ch.ID)
	fmt.Println("attempts:", len(*keys), "same key:", (*keys)[0] == (*keys)[1] && (*keys)[0] != "")
	// Output:
	// charge: ch_123
	// attempts: 2 same key: true
}

// With stripe-go's default retries left on (2) over the Transport's (4
// attempts), against a Stripe that is down: the Transport recognises
// stripe-go's retries by their repeated key and sends them once, so the
// wire sees R + S − 1 = 6 attempts, not 12.
func TestStripeStackedRetries(t *testing.T) {
	srv, keys := fakeStripe(1 << 30)
	defer srv.Close()
	client := &http.Client{Transport: &retryhttp.Transport{Budget: retryhttp.NoBudget, Policy: retryhttp.Policy{BaseDelay: time.Millisecond}}}
	sc := stripe.NewClient("sk_test_123", stripe.WithBackends(stripe.NewBackendsWithConfig(&stripe.BackendConfig{
		URL: stripe.String(srv.URL), HTTPClient: client, LeveledLogger: &stripe.LeveledLogger{Level: stripe.LevelNull},
	})))
	_, err := sc.V1Charges.Create(context.Background(), &stripe.ChargeCreateParams{Amount: stripe.Int64(100), Currency: stripe.String("usd")})
	if err == nil {
		t.Fatal("a Stripe that is down returned no error")
	}
	if got := len(*keys); got != 4+3-1 {
		t.Fatalf("%d attempts on the wire, want R + S − 1 = 6", got)
	}
}

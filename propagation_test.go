package retryhttp_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retryhttp/retryhttp"
	"github.com/retryhttp/retryhttp/idempotency"
	rt "github.com/retryhttp/retryhttp/retryhttptest"
)

// A checkout service: a handler behind the
// middleware calls a payment gateway through a Transport that injects keys,
// then fails its own commit on every fourth run (the claim is released, the
// client retries, the handler runs again). With the request's context, the
// gateway key is derived from the inbound one, so the gateway's middleware
// recognises the second run's call: one charge per order. Without it
// (context.Background(), as code that drops the context does), every run
// is a fresh key and a fresh charge.
func TestKeyPropagationAcrossHandlerRuns(t *testing.T) {
	for _, propagate := range []bool{true, false} {
		t.Run(fmt.Sprintf("request context=%v", propagate), func(t *testing.T) {
			gatewayMW, err := idempotency.New(idempotency.Options{})
			require.NoError(t, err)
			var charges atomic.Int32
			gateway := rt.Start(t, rt.Script{"*": {rt.Forward()}}, rt.Options{Handler: gatewayMW.Handler(http.HandlerFunc(
				func(w http.ResponseWriter, r *http.Request) {
					charges.Add(1)
					w.WriteHeader(201)
				}))})
			toGateway := &http.Client{Transport: &retryhttp.Transport{Base: gateway.Transport(), InjectIdempotencyKey: true}}

			var runs atomic.Int32
			checkoutMW, err := idempotency.New(idempotency.Options{})
			require.NoError(t, err)
			checkout := httptest.NewServer(checkoutMW.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				ctx := r.Context()
				if !propagate {
					ctx = context.Background()
				}
				req, _ := http.NewRequestWithContext(ctx, "POST", gateway.URL+"/v1/charges", strings.NewReader(`{"amount":100}`))
				resp, err := toGateway.Do(req)
				if err != nil || resp.StatusCode != 201 {
					http.Error(w, "gateway", 502)
					return
				}
				resp.Body.Close()
				if runs.Add(1)%4 == 1 { // the commit after the provider call fails
					http.Error(w, "commit failed", 503)
					return
				}
				w.WriteHeader(201)
			})))
			defer checkout.Close()

			client := &http.Client{Transport: &retryhttp.Transport{InjectIdempotencyKey: true, Budget: retryhttp.NoBudget,
				Policy: retryhttp.Policy{BaseDelay: time.Millisecond, MaxDelay: time.Millisecond}}}
			const orders = 40
			for i := range orders {
				resp, err := client.Post(checkout.URL+"/orders", "application/json", strings.NewReader(fmt.Sprintf(`{"order":%d}`, i)))
				require.NoError(t, err)
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				require.Equal(t, 201, resp.StatusCode)
			}
			t.Logf("%d orders, %d handler runs, %d gateway charges", orders, runs.Load(), charges.Load())
			if propagate {
				assert.Equal(t, int32(orders), charges.Load(), "one charge per order")
			} else {
				assert.Greater(t, charges.Load(), int32(orders), "random keys: the re-runs charge again")
			}
		})
	}
}

package retryhttp_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"time"

	"github.com/retryhttp/retryhttp"
)

// flaky answers 503 to the first two requests and 200 after that.
func flaky() *httptest.Server {
	var n atomic.Int32
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) <= 2 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintf(w, "served on attempt %d", n.Load())
	}))
}

// A client that retries transient failures: set the Transport and use the
// client as before.
func Example() {
	srv := flaky()
	defer srv.Close()

	client := &http.Client{
		Transport: &retryhttp.Transport{Policy: retryhttp.Policy{BaseDelay: 10 * time.Millisecond}},
		Timeout:   10 * time.Second,
	}
	resp, err := client.Get(srv.URL)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Println(resp.StatusCode, string(body))
	// Output: 200 served on attempt 3
}

// A third-party SDK that takes an *http.Client: wrap whatever transport it
// already has, so its own settings (proxies, TLS, tracing) stay in force.
func ExampleTransport_wrapSDKClient() {
	srv := flaky()
	defer srv.Close()

	sdkClient := &http.Client{Transport: http.DefaultTransport} // as handed to you by the SDK
	sdkClient.Transport = &retryhttp.Transport{
		Base:   sdkClient.Transport,
		Policy: retryhttp.Policy{BaseDelay: 10 * time.Millisecond},
		// The SDK's server says when a retry will not help.
		ShouldRetry: func(_ *http.Request, resp *http.Response, _ error) (retryhttp.Decision, error) {
			if resp != nil && resp.Header.Get("X-Should-Retry") == "false" {
				return retryhttp.DecisionStop, nil
			}
			return retryhttp.DecisionDefer, nil
		},
	}
	resp, err := sdkClient.Get(srv.URL)
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	fmt.Println(resp.StatusCode)
	// Output: 200
}

// A POST is retried only with an Idempotency-Key. InjectIdempotencyKey adds
// one per logical request and sends the same key on every attempt, so a
// server that honours it (package idempotency) acts once.
func ExampleTransport_injectIdempotencyKey() {
	var keys []string
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		keys = append(keys, r.Header.Get("Idempotency-Key"))
		if n.Add(1) == 1 {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		w.WriteHeader(http.StatusCreated)
	}))
	defer srv.Close()

	client := &http.Client{Transport: &retryhttp.Transport{
		InjectIdempotencyKey: true,
		Policy:               retryhttp.Policy{BaseDelay: 10 * time.Millisecond},
	}}
	resp, err := client.Post(srv.URL+"/charges", "application/json", strings.NewReader(`{"amount":1000}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	fmt.Println(resp.StatusCode, len(keys), "attempts, same key:", keys[0] == keys[1] && keys[0] != "")
	// Output: 201 2 attempts, same key: true
}

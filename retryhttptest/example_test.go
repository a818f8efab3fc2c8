package retryhttptest_test

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/retryhttp/retryhttp"
	"github.com/retryhttp/retryhttp/idempotency"
	"github.com/retryhttp/retryhttp/retryhttptest"
)

// quick keeps the examples' waits in milliseconds.
var quick = retryhttp.Policy{BaseDelay: time.Millisecond, MaxDelay: 5 * time.Millisecond}

func newClient(srv *retryhttptest.Server, tr *retryhttp.Transport) *http.Client {
	tr.Base = srv.Transport()
	return &http.Client{Transport: tr}
}

// Status: 503 twice, then 200.
func ExampleStatus() {
	srv, _ := retryhttptest.NewServer(retryhttptest.Script{
		"/": {retryhttptest.Status(503), retryhttptest.Status(503), retryhttptest.Status(200)},
	}, retryhttptest.Options{})
	defer srv.Close()

	resp, err := newClient(srv, &retryhttp.Transport{Policy: quick}).Get(srv.URL)
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	for _, r := range srv.Requests() {
		fmt.Println(r.Did)
	}
	fmt.Println("client got", resp.StatusCode)
	// Output:
	// 503
	// 503
	// 200
	// client got 200
}

// RetryAfter: 429 with Retry-After: 1; the client waits at least a second.
func ExampleRetryAfter() {
	srv, _ := retryhttptest.NewServer(retryhttptest.Script{
		"/": {retryhttptest.RetryAfter(429, "1"), retryhttptest.Status(200)},
	}, retryhttptest.Options{})
	defer srv.Close()

	resp, err := newClient(srv, &retryhttp.Transport{Policy: quick}).Get(srv.URL)
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	reqs := srv.Requests()
	fmt.Println(len(reqs), "attempts; waited at least 1s:", reqs[1].At.Sub(reqs[0].At) >= time.Second)
	// Output: 2 attempts; waited at least 1s: true
}

// Step.After: a slow response trips the client's per-attempt timeout; the
// second attempt is answered in time.
func ExampleStep_After() {
	srv, _ := retryhttptest.NewServer(retryhttptest.Script{
		"/": {retryhttptest.Status(200).After(time.Minute), retryhttptest.Status(200)},
	}, retryhttptest.Options{})
	defer srv.Close()

	p := quick
	p.AttemptTimeout = 50 * time.Millisecond
	resp, err := newClient(srv, &retryhttp.Transport{Policy: p}).Get(srv.URL)
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	fmt.Println(len(srv.Requests()), "attempts, got", resp.StatusCode)
	// Output: 2 attempts, got 200
}

// Reset: the connection is reset after the request was read; a GET is
// retried.
func ExampleReset() {
	srv, _ := retryhttptest.NewServer(retryhttptest.Script{
		"/": {retryhttptest.Reset(), retryhttptest.Status(200)},
	}, retryhttptest.Options{})
	defer srv.Close()

	resp, err := newClient(srv, &retryhttp.Transport{Policy: quick}).Get(srv.URL)
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	fmt.Println(srv.Requests()[0].Did, "then", resp.StatusCode)
	// Output: reset then 200
}

// DropResponse with Forward: the server creates the resource and the
// response is lost. The POST is retried under its injected key; a server
// that ignores the key creates a second resource, which Effects shows.
func ExampleDropResponse() {
	srv, _ := retryhttptest.NewServer(retryhttptest.Script{
		"/charges": {retryhttptest.DropResponse(), retryhttptest.Forward()},
	}, retryhttptest.Options{})
	defer srv.Close()

	client := newClient(srv, &retryhttp.Transport{Policy: quick, InjectIdempotencyKey: true})
	resp, err := client.Post(srv.URL+"/charges", "application/json", strings.NewReader(`{"amount":1}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	reqs := srv.Requests()
	fmt.Println("same key:", reqs[0].IdempotencyKey() == reqs[1].IdempotencyKey())
	fmt.Println("effects for that key:", srv.Effects.Count(reqs[0].IdempotencyKey()))
	// Output:
	// same key: true
	// effects for that key: 2
}

// PartialBody: headers arrive, the body is cut. The Transport has already
// returned the response, so the reader sees the error.
func ExamplePartialBody() {
	srv, _ := retryhttptest.NewServer(retryhttptest.Script{
		"/": {retryhttptest.PartialBody(200, `{"items":[1,2,3]}`, 9)},
	}, retryhttptest.Options{})
	defer srv.Close()

	resp, err := newClient(srv, &retryhttp.Transport{Policy: quick}).Get(srv.URL)
	if err != nil {
		fmt.Println(err)
		return
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	fmt.Printf("%d %q unexpected EOF: %v\n", resp.StatusCode, body, errors.Is(err, io.ErrUnexpectedEOF))
	// Output: 200 "{\"items\":" unexpected EOF: true
}

// Forward runs your own handler: here one that counts creations.
func ExampleForward() {
	effects := &retryhttptest.Effects{}
	srv, _ := retryhttptest.NewServer(retryhttptest.Script{
		"/things": {retryhttptest.Status(502), retryhttptest.Forward()},
	}, retryhttptest.Options{Handler: effects.Handler(http.StatusCreated, "created")})
	defer srv.Close()

	client := newClient(srv, &retryhttp.Transport{Policy: quick, InjectIdempotencyKey: true})
	resp, err := client.Post(srv.URL+"/things", "text/plain", strings.NewReader("thing"))
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	fmt.Println(resp.StatusCode, "effects:", effects.Total())
	// Output: 201 effects: 1
}

// A server that honours idempotency keys but loses responses, in three
// lines: the client retries under one key, the middleware replays, and the
// effect happens once.
func Example_honoursKeysButLosesResponses() {
	effects := &retryhttptest.Effects{}
	mw, _ := idempotency.New(idempotency.Options{})
	srv, _ := retryhttptest.NewServer(retryhttptest.Script{"/charges": {retryhttptest.DropResponse(), retryhttptest.Forward()}},
		retryhttptest.Options{Handler: mw.Handler(effects.Handler(http.StatusCreated, `{"id":1}`))})
	defer srv.Close()

	client := newClient(srv, &retryhttp.Transport{Policy: quick, InjectIdempotencyKey: true})
	resp, err := client.Post(srv.URL+"/charges", "application/json", strings.NewReader(`{"amount":1}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	fmt.Println(resp.StatusCode, "replayed:", resp.Header.Get("Idempotent-Replayed"), "effects:", effects.Total())
	// Output: 201 replayed: true effects: 1
}

// Respond: any status, headers and body; here a redirect the client
// follows.
func ExampleRespond() {
	srv, _ := retryhttptest.NewServer(retryhttptest.Script{
		"/old": {retryhttptest.Respond(http.StatusMovedPermanently, http.Header{"Location": {"/new"}}, "")},
		"/new": {retryhttptest.Status(200)},
	}, retryhttptest.Options{})
	defer srv.Close()

	resp, err := newClient(srv, &retryhttp.Transport{Policy: quick}).Get(srv.URL + "/old")
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	fmt.Println(resp.StatusCode, resp.Request.URL.Path)
	// Output: 200 /new
}

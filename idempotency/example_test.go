package idempotency_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"

	"github.com/retryhttp/retryhttp/idempotency"
)

// The same POST sent twice with one key: the handler runs once, the second
// answer is the stored one. Another payload under that key is refused.
func Example() {
	var charges atomic.Int32
	createCharge := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := charges.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"id":%d}`, n)
	})
	mw, err := idempotency.New(idempotency.Options{}) // in-memory store: one process only
	if err != nil {
		panic(err)
	}
	srv := httptest.NewServer(mw.Handler(createCharge))
	defer srv.Close()

	send := func(body string) {
		req, _ := http.NewRequest("POST", srv.URL+"/charges", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer alice")
		req.Header.Set("Idempotency-Key", `"order-1234"`)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			panic(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		fmt.Printf("%d replayed=%q %s\n", resp.StatusCode, resp.Header.Get(idempotency.HeaderReplayed), strings.TrimSpace(string(b)))
	}
	send(`{"amount":100}`)
	send(`{ "amount": 100 }`) // the same JSON, spaced differently
	send(`{"amount":200}`)
	fmt.Println("charges:", charges.Load())
	// Output:
	// 201 replayed="" {"id":1}
	// 201 replayed="true" {"id":1}
	// 422 replayed="" {"title":"Idempotency-Key reused","status":422,"detail":"this key was used for a request with a different method, path, query or body"}
	// charges: 1
}

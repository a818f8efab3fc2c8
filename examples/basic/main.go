// Command basic shows retryhttp against a local flaky server: a GET that
// meets two 503s, and a POST whose dropped response is retried under one
// Idempotency-Key. Run it with: go run ./examples/basic
package main

import (
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"

	"github.com/retryhttp/retryhttp"
)

func main() {
	var mu sync.Mutex
	seen := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen[r.URL.Path]++
		n := seen[r.URL.Path]
		mu.Unlock()
		log.Printf("server: %s %s attempt %d key=%q", r.Method, r.URL.Path, n, r.Header.Get("Idempotency-Key"))
		if n <= 2 {
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	}))
	defer srv.Close()

	client := &http.Client{
		Timeout: 10 * time.Second,
		Transport: &retryhttp.Transport{
			InjectIdempotencyKey: true,
			Policy:               retryhttp.Policy{BaseDelay: 50 * time.Millisecond},
		},
	}
	start := time.Now()
	resp, err := client.Get(srv.URL + "/items")
	if err != nil {
		log.Fatal(err)
	}
	resp.Body.Close()
	log.Printf("client: GET /items -> %d after %v", resp.StatusCode, time.Since(start).Round(time.Millisecond))

	start = time.Now()
	resp, err = client.Post(srv.URL+"/charges", "application/json", strings.NewReader(`{"amount":1000}`))
	if err != nil {
		log.Fatal(err)
	}
	resp.Body.Close()
	log.Printf("client: POST /charges -> %d after %v (one key on every attempt)", resp.StatusCode, time.Since(start).Round(time.Millisecond))
}

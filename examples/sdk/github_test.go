package sdk

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/google/go-github/v84/github"

	"github.com/retryhttp/retryhttp"
)

// go-github has no retries of its own. GitHub's primary rate limit answers
// 403 with X-RateLimit-Remaining: 0 and X-RateLimit-Reset as a Unix time;
// the default RetryHints read the reset as a Unix time (its size tells),
// and a ShouldRetry makes that 403, and only that one, retryable. A reset
// further away than Policy.MaxRetryAfter (30 s) comes back at once, as
// go-github's RateLimitError.
func Example_gitHub() {
	var calls atomic.Int32
	var first time.Time
	var waited time.Duration
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		if calls.Add(1) == 1 {
			first = time.Now()
			w.Header().Set("X-RateLimit-Limit", "60")
			w.Header().Set("X-RateLimit-Remaining", "0")
			w.Header().Set("X-RateLimit-Reset", strconv.FormatInt(time.Now().Add(1500*time.Millisecond).Unix(), 10))
			w.WriteHeader(http.StatusForbidden)
			io.WriteString(w, `{"message":"API rate limit exceeded"}`)
			return
		}
		waited = time.Since(first)
		io.WriteString(w, `{"id":1,"name":"retryhttp","full_name":"retryhttp/retryhttp"}`)
	}))
	defer srv.Close()

	primaryRateLimit := func(_ *http.Request, resp *http.Response, _ error) (retryhttp.Decision, error) {
		if resp != nil && resp.StatusCode == http.StatusForbidden && resp.Header.Get("X-RateLimit-Remaining") == "0" {
			return retryhttp.DecisionRetry, nil
		}
		return retryhttp.DecisionDefer, nil
	}
	client := github.NewClient(&http.Client{Transport: &retryhttp.Transport{ShouldRetry: primaryRateLimit}})
	client.BaseURL, _ = url.Parse(srv.URL + "/")
	repo, _, err := client.Repositories.Get(context.Background(), "retryhttp", "retryhttp")
	if err != nil {
		panic(err)
	}
	fmt.Println(repo.GetFullName())
	fmt.Println("calls:", calls.Load(), "waited for the reset:", waited >= 500*time.Millisecond)
	// Output:
	// retryhttp/retryhttp
	// calls: 2 waited for the reset: true
}

// Package safe_any_method retries requests of any method only where the
// method is checked: idempotent methods alone are resent.
package safe_any_method

import (
	"net/http"
	"time"

	"github.com/hashicorp/go-retryablehttp"
)

func idempotent(req *http.Request) bool {
	return req.Method == http.MethodGet || req.Method == http.MethodHead || req.Method == http.MethodPut
}

func perform(c *http.Client, req *http.Request) (*http.Response, error) { // want perform:"sends its parameter 1 through its client 0"
	var resp *http.Response
	var err error
	for i := 0; i < 3; i++ {
		if resp, err = c.Do(req); err == nil || !idempotent(req) {
			return resp, err
		}
		time.Sleep(time.Second)
	}
	return resp, err
}

func send(c *retryablehttp.Client, req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodGet {
		return c.HTTPClient.Do(req) // sent once
	}
	r, err := retryablehttp.FromRequest(req)
	if err != nil {
		return nil, err
	}
	return c.Do(r)
}

// poll sends GETs it builds itself, through a function value.
func poll(do func(*http.Request) (*http.Response, error)) { // want poll:"retries its parameter 0"
	for i := 0; i < 10; i++ {
		req, _ := http.NewRequest(http.MethodGet, "https://api.example.com/jobs/1", nil)
		if resp, err := do(req); err == nil && resp.StatusCode == http.StatusOK {
			return
		}
		time.Sleep(time.Second)
	}
}

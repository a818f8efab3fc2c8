// Package safe_any_method_keyed resends requests of any method, but keys
// the ones with side effects where it builds them, as stripe-go does.
package safe_any_method_keyed

import (
	"net/http"
	"time"

	"github.com/google/uuid"
)

func newRequest(method, url string) (*http.Request, error) { // want newRequest:`builds a request of its parameter 0's method`
	req, err := http.NewRequest(method, url, nil)
	if err == nil && method == http.MethodPost {
		req.Header.Set("Idempotency-Key", uuid.NewString())
	}
	return req, err
}

func perform(c *http.Client, req *http.Request) (*http.Response, error) { // want perform:"sends its parameter 1 through its client 0"
	var resp *http.Response
	var err error
	for i := 0; i < 3; i++ {
		if resp, err = c.Do(req); err == nil {
			return resp, nil
		}
		time.Sleep(time.Second)
	}
	return resp, err
}

var _ = newRequest

// Package unsafe_rehttp sends POSTs through a rehttp Transport that
// retries every method, with no Idempotency-Key.
package unsafe_rehttp

import (
	"bytes"
	"net/http"
	"time"

	"github.com/PuerkitoBio/rehttp"
)

func client() *http.Client {
	return &http.Client{Transport: rehttp.NewTransport(nil, // want `rehttp retries every method its RetryFn allows`
		rehttp.RetryAll(rehttp.RetryMaxRetries(3), rehttp.RetryTemporaryErr()),
		rehttp.ConstDelay(time.Second))}
}

// anyBranch allows POST through one branch of RetryAny.
func anyBranch() http.RoundTripper {
	return rehttp.NewTransport(nil, rehttp.RetryAny( // want `rehttp retries every method its RetryFn allows`
		rehttp.RetryAll(rehttp.RetryMaxRetries(3), rehttp.RetryHTTPMethods("GET")),
		rehttp.RetryAll(rehttp.RetryMaxRetries(3), rehttp.RetryStatuses(503))),
		rehttp.ExpJitterDelay(time.Second, 10*time.Second))
}

// custom reads nothing of the request.
func custom() http.RoundTripper {
	return rehttp.NewTransport(nil, func(a rehttp.Attempt) bool { return a.Index < 3 }, rehttp.ConstDelay(time.Second)) // want `rehttp retries every method its RetryFn allows`
}

func charge(c *http.Client, body []byte) error { // want charge:`sends a POST \(charge\)`
	req, _ := http.NewRequest(http.MethodPost, "https://api.example.com/charges", bytes.NewReader(body))
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	return resp.Body.Close()
}

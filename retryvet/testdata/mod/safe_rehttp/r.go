// Package safe_rehttp uses rehttp where a retried POST is not possible or
// not unsafe.
package safe_rehttp

import (
	"bytes"
	"net/http"
	"time"

	"github.com/PuerkitoBio/rehttp"
)

// safeMethods retries GETs and HEADs only.
func safeMethods() *http.Client {
	return &http.Client{Transport: rehttp.NewTransport(nil,
		rehttp.RetryAll(rehttp.RetryMaxRetries(3), rehttp.RetryHTTPMethods("GET", "HEAD"), rehttp.RetryTemporaryErr()),
		rehttp.ConstDelay(time.Second))}
}

// readsMethod decides by the request's method.
func readsMethod() http.RoundTripper {
	return rehttp.NewTransport(nil, func(a rehttp.Attempt) bool {
		return a.Index < 3 && a.Request.Method == http.MethodGet
	}, rehttp.ConstDelay(time.Second))
}

// chosen takes its RetryFn from the caller.
func chosen(retry rehttp.RetryFn) http.RoundTripper {
	return rehttp.NewTransport(nil, retry, rehttp.ConstDelay(time.Second))
}

func charge(c *http.Client, body []byte) error { // want charge:`sends a POST \(charge\)`
	req, _ := http.NewRequest(http.MethodPost, "https://api.example.com/charges", bytes.NewReader(body))
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	return resp.Body.Close()
}

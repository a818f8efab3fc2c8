// Package unsafe_nowait retries POSTs without waiting between the
// attempts: the loop leaves when a send succeeds and goes round again when
// it fails.
package unsafe_nowait

import (
	"bytes"
	"errors"
	"iter"
	"net/http"
	"time"
)

// leavesOnSuccess tries three times at once.
func leavesOnSuccess(c *http.Client, body []byte) (*http.Response, error) { // want leavesOnSuccess:`sends a POST \(leavesOnSuccess\)`
	for i := 0; i < 3; i++ {
		req, _ := http.NewRequest(http.MethodPost, "https://api.example.com/charges", bytes.NewReader(body))
		resp, err := c.Do(req) // want `POST retried by this loop without an Idempotency-Key`
		if err == nil && resp.StatusCode < 500 {
			return resp, nil
		}
	}
	return nil, errors.New("gave up")
}

// continuesOnFailure goes round again on an error or a 5xx, and returns
// what it got otherwise.
func continuesOnFailure(c *http.Client, body []byte) (*http.Response, error) { // want continuesOnFailure:`sends a PATCH \(continuesOnFailure\)`
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		req, _ := http.NewRequest(http.MethodPatch, "https://api.example.com/orders/1", bytes.NewReader(body))
		resp, err := c.Do(req) // want `PATCH retried by this loop without an Idempotency-Key`
		if err != nil || resp.StatusCode >= 500 {
			lastErr = err
			continue
		}
		return resp, nil
	}
	return nil, lastErr
}

// untilRetryable stops when its helper says a retry would not help.
func untilRetryable(c *http.Client, body []byte) (*http.Response, error) { // want untilRetryable:`sends a POST \(untilRetryable\)`
	var (
		resp *http.Response
		err  error
	)
	for range 3 {
		resp, err = c.Post("https://api.example.com/charges", "application/json", bytes.NewReader(body)) // want `POST retried by this loop without an Idempotency-Key`
		if !shouldRetry(resp, err) {
			break
		}
	}
	return resp, err
}

func shouldRetry(resp *http.Response, err error) bool {
	return err != nil || resp.StatusCode >= 500
}

// again retries by calling itself, at once, when the send fails.
func again(c *http.Client, body []byte, left int) (*http.Response, error) { // want again:`sends a POST \(again\)`
	req, _ := http.NewRequest(http.MethodPost, "https://api.example.com/charges", bytes.NewReader(body))
	resp, err := c.Do(req) // want `POST retried by this recursion without an Idempotency-Key`
	if err != nil && left > 0 {
		return again(c, body, left-1)
	}
	return resp, err
}

// attempts yields 0, 1, ... n-1, sleeping before each but the first: a
// range over it waits between its passes.
func attempts(n int) iter.Seq[int] { // want attempts:`returns a function that retries its parameter 0`
	return func(yield func(int) bool) {
		for i := range n {
			if i > 0 {
				time.Sleep(time.Duration(i) * 100 * time.Millisecond)
			}
			if !yield(i) {
				return
			}
		}
	}
}

// overAttempts waits in the iterator it ranges over.
func overAttempts(c *http.Client, body []byte) { // want overAttempts:`sends a POST \(overAttempts\)`
	for range attempts(3) {
		req, _ := http.NewRequest(http.MethodPost, "https://api.example.com/charges", bytes.NewReader(body))
		resp, err := c.Do(req) // want `POST retried by this loop without an Idempotency-Key`
		if done(resp, err) {
			return
		}
	}
}

func done(resp *http.Response, err error) bool { return resp != nil && err == nil }

// newCharge builds the POST the loop below sends: its method is known
// through the builder, not only a request "of any method".
func newCharge(body []byte) (*http.Request, error) { // want newCharge:`builds a POST request`
	method := http.MethodPost
	return http.NewRequest(method, "https://api.example.com/charges", bytes.NewReader(body))
}

func built(c *http.Client, body []byte) { // want built:`sends a POST \(built\)`
	for attempt := 0; attempt < 3; attempt++ {
		req, _ := newCharge(body)
		if resp, err := c.Do(req); err == nil { // want `POST retried by this loop without an Idempotency-Key`
			resp.Body.Close()
			return
		}
		time.Sleep(time.Second)
	}
}

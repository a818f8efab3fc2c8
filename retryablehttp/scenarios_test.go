package retryablehttp_test

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestSideBySide(t *testing.T) {
	retryAfter := func(code int, v string) step { return step{status: code, header: http.Header{"Retry-After": {v}}} }
	for _, sc := range []scenario{
		{name: "503 then 200", steps: []step{status(503), status(503), status(200)}, retryMax: 4},
		{name: "503 until the retries run out", steps: []step{status(503)}, retryMax: 3},
		{name: "500 is retried", steps: []step{status(500), status(200)}, retryMax: 2},
		{name: "501 is not", steps: []step{status(501)}, retryMax: 2},
		{name: "404 is not", steps: []step{status(404)}, retryMax: 2},
		{name: "429 is", steps: []step{status(429), status(204)}, retryMax: 2},
		{name: "no retries", steps: []step{status(503)}, retryMax: 0},
		{name: "connection closed, then 200", steps: []step{hangup, status(200)}, retryMax: 2},
		{name: "connection closed every time", steps: []step{hangup}, retryMax: 2},
		{name: "POST 503 then 201", method: "POST", body: func() any { return []byte("order 1") }, steps: []step{status(503), status(201)}, retryMax: 2},
		{name: "PUT with a bytes.Buffer", method: "PUT", body: func() any { return bytes.NewBufferString("put") }, steps: []step{status(502), status(200)}, retryMax: 1},
		{name: "PATCH with a strings.Reader", method: "PATCH", body: func() any { return strings.NewReader("patch") }, steps: []step{status(504), status(200)}, retryMax: 1},
		{name: "POST with a stream", method: "POST", body: func() any { return io.MultiReader(strings.NewReader("stream")) }, steps: []step{status(503), status(200)}, retryMax: 1},
		{name: "POST with a ReaderFunc", method: "POST", body: func() any {
			return func() (io.Reader, error) { return strings.NewReader("func"), nil }
		}, steps: []step{status(503), status(200)}, retryMax: 1},
		{name: "ErrorPropagatedRetryPolicy on 503", steps: []step{status(503)}, retryMax: 2, check: "propagated"},
		{name: "CheckRetry (false, err)", steps: []step{status(200)}, retryMax: 2, check: "refuse"},
		{name: "CheckRetry (true, err)", steps: []step{status(200)}, retryMax: 2, check: "always"},
		{name: "ErrorHandler passes through", steps: []step{status(503)}, retryMax: 2, errors: "passthrough"},
		{name: "ErrorHandler sees the tries", steps: []step{status(503)}, retryMax: 2, errors: "count"},
		{name: "ErrorHandler after a closed connection", steps: []step{hangup}, retryMax: 1, errors: "count"},
		{name: "DefaultBackoff reads Retry-After", steps: []step{retryAfter(429, "0"), status(200)}, retryMax: 1, backoff: "default"},
		{name: "DefaultBackoff doubles", steps: []step{status(503), status(503), status(200)}, retryMax: 2, backoff: "default"},
		{name: "PrepareRetry on each retry", steps: []step{status(503), status(503), status(200)}, retryMax: 3, prepare: "header"},
		{name: "PrepareRetry fails", steps: []step{status(503)}, retryMax: 3, prepare: "fail"},
		{name: "a response handler's error is retried", steps: []step{status(200)}, retryMax: 2, handler: "fail-once"},
		{name: "HTTPClient.Timeout bounds each attempt", steps: []step{{status: 200, delay: 5 * time.Second}, status(200)}, retryMax: 2, client: 500 * time.Millisecond},
		{name: "the deadline ends a wait", steps: []step{retryAfter(503, "5")}, retryMax: 3, backoff: "default", timeout: 200 * time.Millisecond},
	} {
		t.Run(sc.name, func(t *testing.T) {
			theirs := runUpstream(t, sc)
			mine, keys := runOurs(t, sc)
			sameOutcome(t, theirs, mine)
			method := sc.methodOrGET()
			if method == "POST" || method == "PATCH" {
				if keys[0] == "" || strings.Count(strings.Join(keys, ","), keys[0]) != len(keys) {
					t.Errorf("Idempotency-Keys %q: want one key on every attempt", keys)
				}
			} else if strings.Join(keys, "") != "" {
				t.Errorf("Idempotency-Keys %q on a %s", keys, method)
			}
		})
	}
}

package docs

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/retryhttp/retryhttp"
)

// The rows of docs/MIGRATING.md's hand-written loop table, the loop and the
// Transport against the same script, under testing/synctest.

// handLoop is the guide's "before": up to four attempts, a new request
// each time, a 5xx or an error retried after 100 ms·2ⁿ.
func handLoop(c *http.Client, ctx context.Context, body []byte) (*http.Response, error) {
	var resp *http.Response
	var err error
	for attempt := 0; attempt < 4; attempt++ {
		req, _ := http.NewRequestWithContext(ctx, "PUT", "http://api.test/x", bytes.NewReader(body))
		resp, err = c.Do(req)
		if err == nil && resp.StatusCode < 500 {
			break
		}
		if resp != nil && attempt < 3 {
			resp.Body.Close()
		}
		if attempt < 3 {
			time.Sleep(time.Duration(1<<attempt) * 100 * time.Millisecond)
		}
	}
	return resp, err
}

func put(c *http.Client, ctx context.Context, body []byte) (*http.Response, error) {
	req, _ := http.NewRequestWithContext(ctx, "PUT", "http://api.test/x", bytes.NewReader(body))
	return c.Do(req)
}

var loopPolicy = retryhttp.Policy{MaxAttempts: 4, BaseDelay: 100 * time.Millisecond, Jitter: retryhttp.JitterNone}

var loopRows = map[string]func(t *testing.T){
	"`for attempt := 0; attempt < 4; attempt++` around `client.Do`": func(t *testing.T) {
		b, a := script(503), script(503)
		got(handLoop(&http.Client{Transport: b}, context.Background(), nil))
		got(put(after(a, &retryhttp.Transport{Policy: loopPolicy}), context.Background(), nil))
		same(t, "four attempts", b.attempts(), a.attempts(), 4)
	},
	"`time.Sleep(backoff)` between attempts": func(t *testing.T) {
		b, a := script(503, 503, 503, 200), script(503, 503, 503, 200)
		got(handLoop(&http.Client{Transport: b}, context.Background(), nil))
		got(put(after(a, &retryhttp.Transport{Policy: loopPolicy}), context.Background(), nil))
		same(t, "the same waits", b.waits()[2], a.waits()[2], 400*time.Millisecond)
		ctx, cancel := context.WithTimeout(context.Background(), 250*time.Millisecond)
		defer cancel()
		d := script(503)
		start := time.Now()
		got(put(after(d, &retryhttp.Transport{Policy: loopPolicy}), ctx, nil))
		if took := time.Since(start); took > 250*time.Millisecond || d.attempts() != 2 {
			t.Errorf("under a 250 ms deadline: %d attempts in %v; want 2, returned before the deadline (the loop sleeps past it)", d.attempts(), took)
		}
	},
	"a new request (and body) per attempt": func(t *testing.T) {
		b, a := script(503, 200), script(503, 200)
		got(handLoop(&http.Client{Transport: b}, context.Background(), []byte("body")))
		got(put(after(a, &retryhttp.Transport{Policy: loopPolicy}), context.Background(), []byte("body")))
		same(t, "the body on the retry", b.seen[1].body, a.seen[1].body, "body")
	},
	"`if resp.StatusCode >= 500`": func(t *testing.T) {
		b, a := script(500, 200), script(500, 200)
		got(handLoop(&http.Client{Transport: b}, context.Background(), nil))
		got(put(after(a, &retryhttp.Transport{Policy: loopPolicy}), context.Background(), nil))
		if b.attempts() != 2 || a.attempts() != 1 {
			t.Errorf("a 500: the loop %d attempts, the Transport %d; want 2 and 1 (a 500 is not retried by default)", b.attempts(), a.attempts())
		}
		c := script(500, 200)
		got(put(after(c, &retryhttp.Transport{Policy: loopPolicy, RetryStatuses: append(retryhttp.DefaultRetryStatuses(), 500)}), context.Background(), nil))
		same(t, "RetryStatuses brings the 500 back", c.attempts(), b.attempts(), 2)
	},
	"closing the failed response's body": func(t *testing.T) {
		b, a := script(503, 503, 200), script(503, 503, 200)
		r1, e1 := handLoop(&http.Client{Transport: b}, context.Background(), nil)
		r2, e2 := put(after(a, &retryhttp.Transport{Policy: loopPolicy}), context.Background(), nil)
		// Before the caller closes the last one: the loop closed the
		// failed responses itself, the Transport closes them for you.
		same(t, "the failed responses closed, the last one open", fmt.Sprint(b.bodiesClosed()), fmt.Sprint(a.bodiesClosed()), "[true true false]")
		same(t, "the last response", got(r1, e1), got(r2, e2), "200")
	},
}

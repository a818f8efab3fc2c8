package bench

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/retryhttp/retryhttp/retryhttptest"
)

// outcome is what one library did with one request.
type outcome struct {
	attempts int  // requests the server saw
	effects  int  // side effects the server performed
	gotResp  bool // a response came back (err == nil)
	status   int
}

func post(t *testing.T, l Lib, script []retryhttptest.Step, body func() *http.Request) outcome {
	t.Helper()
	srv := retryhttptest.Start(t, retryhttptest.Script{"/charges": script}, retryhttptest.Options{})
	base := srv.Transport()
	defer base.(*http.Transport).CloseIdleConnections()
	rt := l.Wrap(base)
	req := body()
	req.URL, _ = req.URL.Parse(srv.URL + "/charges")
	req.Host = ""
	resp, err := rt.RoundTrip(req)
	o := outcome{attempts: len(srv.Requests()), effects: srv.Effects.Total(), gotResp: err == nil}
	if err == nil {
		o.status = resp.StatusCode
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	return o
}

func newPOST() *http.Request {
	r, _ := http.NewRequest("POST", "http://placeholder/charges", strings.NewReader(`{"amount":100}`))
	r.Header.Set("Content-Type", "application/json")
	return r
}

// A POST without an Idempotency-Key answered 503: retrying it is a guess
// that the server did nothing. retryhttp does not guess.
func TestPOSTWithoutKeyAfter503(t *testing.T) {
	want := map[string]int{"retryhttp": 1, "go-retryablehttp": 2, "failsafehttp": 2}
	for _, l := range Competitors() {
		o := post(t, l, []retryhttptest.Step{retryhttptest.Status(503), retryhttptest.Forward()}, newPOST)
		t.Logf("%-18s attempts %d, effects %d, status %d", l.Name, o.attempts, o.effects, o.status)
		if o.attempts != want[l.Name] {
			t.Errorf("%s sent the POST %d times, want %d", l.Name, o.attempts, want[l.Name])
		}
	}
}

// The server charged, then the connection dropped before the response: a
// library that re-sends the POST charges twice.
func TestPOSTWithoutKeyAfterDroppedResponse(t *testing.T) {
	want := map[string]int{"retryhttp": 1, "go-retryablehttp": 2, "failsafehttp": 2}
	for _, l := range Competitors() {
		o := post(t, l, []retryhttptest.Step{retryhttptest.DropResponse(), retryhttptest.Forward()}, newPOST)
		t.Logf("%-18s attempts %d, effects %d, got response %v", l.Name, o.attempts, o.effects, o.gotResp)
		if o.effects != want[l.Name] {
			t.Errorf("%s caused %d charges, want %d", l.Name, o.effects, want[l.Name])
		}
	}
}

// A request whose GetBody recreates the body: retryhttp uses it; the others
// read the whole body into memory themselves and never call it.
func TestGetBodyUsed(t *testing.T) {
	want := map[string]int{"retryhttp": 1, "go-retryablehttp": 0, "failsafehttp": 0}
	for _, l := range Competitors() {
		calls := 0
		o := post(t, l, []retryhttptest.Step{retryhttptest.Status(503), retryhttptest.Status(200)}, func() *http.Request {
			r, _ := http.NewRequest("PUT", "http://placeholder/charges", bytes.NewReader([]byte("payload")))
			gb := r.GetBody
			r.GetBody = func() (io.ReadCloser, error) { calls++; return gb() }
			return r
		})
		t.Logf("%-18s GetBody calls %d, attempts %d", l.Name, calls, o.attempts)
		if calls != want[l.Name] || o.attempts != 2 {
			t.Errorf("%s called GetBody %d times over %d attempts, want %d over 2", l.Name, calls, o.attempts, want[l.Name])
		}
	}
}

// When every attempt gets 503, a drop-in transport returns the last
// response, as the bare transport would have returned the first.
func TestLastResponseOnExhaustion(t *testing.T) {
	want := map[string]bool{"retryhttp": true, "go-retryablehttp": false, "failsafehttp": false}
	for _, l := range Competitors() {
		o := post(t, l, []retryhttptest.Step{retryhttptest.Status(503)}, func() *http.Request {
			r, _ := http.NewRequest("GET", "http://placeholder/charges", nil)
			return r
		})
		t.Logf("%-18s attempts %d, got response %v (status %d)", l.Name, o.attempts, o.gotResp, o.status)
		if o.gotResp != want[l.Name] {
			t.Errorf("%s returned a response: %v, want %v", l.Name, o.gotResp, want[l.Name])
		}
	}
}

// The RoundTripper contract: the caller's request is not modified.
func TestCallerRequestUntouched(t *testing.T) {
	want := map[string]bool{"retryhttp": true, "go-retryablehttp": false, "failsafehttp": false}
	for _, l := range Competitors() {
		var req *http.Request
		var body io.ReadCloser
		post(t, l, []retryhttptest.Step{retryhttptest.Status(503), retryhttptest.Status(200)}, func() *http.Request {
			req, _ = http.NewRequest("PUT", "http://placeholder/charges", nil)
			body = io.NopCloser(strings.NewReader("payload"))
			req.Body, req.ContentLength = body, 7
			return req
		})
		untouched := req.Body == body
		t.Logf("%-18s caller's Body left alone: %v", l.Name, untouched)
		if untouched != want[l.Name] {
			t.Errorf("%s left the caller's request alone: %v, want %v", l.Name, untouched, want[l.Name])
		}
	}
}

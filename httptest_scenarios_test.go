package retryhttp_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/retryhttp/retryhttp"
	rt "github.com/retryhttp/retryhttp/retryhttptest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fast waits 1-2ms between attempts, so real-socket scenarios finish in
// milliseconds while still exercising the wait path.
var fast = retryhttp.Policy{BaseDelay: time.Millisecond, MaxDelay: 2 * time.Millisecond}

// protocols runs a scenario over HTTP/1.1 and over HTTP/2 (TLS), as
// net/http runs its own transport tests.
func protocols(t *testing.T, f func(t *testing.T, h2 bool)) {
	for _, h2 := range []bool{false, true} {
		name := "HTTP/1.1"
		if h2 {
			name = "HTTP/2"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f(t, h2)
		})
	}
}

// client returns an http.Client whose retrying Transport sends through a
// base that speaks srv's protocol; its connections close with the test.
func client(t *testing.T, srv *rt.Server, tr *retryhttp.Transport) *http.Client {
	tr.Base = srv.Transport()
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

func TestScenario503Twice(t *testing.T) {
	protocols(t, func(t *testing.T, h2 bool) {
		srv := rt.Start(t, rt.Script{"/": {rt.Status(503), rt.Status(503), rt.Status(200)}}, rt.Options{HTTP2: h2})
		resp, err := client(t, srv, &retryhttp.Transport{Policy: fast}).Get(srv.URL + "/")
		require.NoError(t, err)
		defer resp.Body.Close()
		assert.Equal(t, 200, resp.StatusCode)
		if h2 {
			assert.Equal(t, 2, resp.ProtoMajor)
		}
		rt.AssertAttempts(t, srv.Requests(), 3)
		rt.AssertWaits(t, srv.Requests(), rt.Range{Min: 0, Max: time.Second})
	})
}

func TestScenarioRetryAfter(t *testing.T) {
	protocols(t, func(t *testing.T, h2 bool) {
		srv := rt.Start(t, rt.Script{"/": {rt.RetryAfter(429, "1"), rt.Status(200)}}, rt.Options{HTTP2: h2})
		resp, err := client(t, srv, &retryhttp.Transport{Policy: fast}).Get(srv.URL + "/")
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, 200, resp.StatusCode)
		rt.AssertAttempts(t, srv.Requests(), 2)
		rt.AssertRetryAfterRespected(t, srv.Requests())
		rt.AssertWaits(t, srv.Requests(), rt.Range{Min: time.Second, Max: 1500 * time.Millisecond})
	})
}

func TestScenarioSlowHeadersTripAttemptTimeout(t *testing.T) {
	protocols(t, func(t *testing.T, h2 bool) {
		srv := rt.Start(t, rt.Script{"/": {rt.Status(200).After(time.Minute), rt.Status(200)}}, rt.Options{HTTP2: h2})
		p := fast
		p.AttemptTimeout = 50 * time.Millisecond
		start := time.Now()
		resp, err := client(t, srv, &retryhttp.Transport{Policy: p}).Get(srv.URL + "/")
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, 200, resp.StatusCode)
		assert.Less(t, time.Since(start), 10*time.Second)
		rt.AssertAttempts(t, srv.Requests(), 2)
	})
}

func TestScenarioClosedPort(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	ln.Close()
	var dials atomic.Int32
	base := &http.Transport{DialContext: func(ctx context.Context, network, a string) (net.Conn, error) {
		dials.Add(1)
		return (&net.Dialer{}).DialContext(ctx, network, a)
	}}
	tr := &retryhttp.Transport{Base: base, Policy: fast}
	// A POST without a key: a refused connection proves nothing was sent.
	resp, err := (&http.Client{Transport: tr}).Post("http://"+addr+"/charge", "text/plain", strings.NewReader("x"))
	assert.Nil(t, resp)
	require.Error(t, err)
	assert.ErrorIs(t, err, syscall.ECONNREFUSED)
	var re *retryhttp.RetryError
	require.ErrorAs(t, err, &re)
	assert.Equal(t, 4, re.Attempts)
	assert.Equal(t, int32(4), dials.Load())
}

func TestScenarioResetAfterReadingRequest(t *testing.T) {
	protocols(t, func(t *testing.T, h2 bool) {
		srv := rt.Start(t, rt.Script{"/": {rt.Reset(), rt.Status(200)}}, rt.Options{HTTP2: h2})
		resp, err := client(t, srv, &retryhttp.Transport{Policy: fast}).Get(srv.URL + "/")
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, 200, resp.StatusCode)
		rt.AssertAttempts(t, srv.Requests(), 2)
	})
}

func TestScenarioPOSTWithoutKeySeenOnce(t *testing.T) {
	protocols(t, func(t *testing.T, h2 bool) {
		for _, first := range []rt.Step{rt.Status(503), rt.Reset(), rt.DropResponse()} {
			srv := rt.Start(t, rt.Script{"/charge": {first, rt.Forward()}}, rt.Options{HTTP2: h2})
			resp, err := client(t, srv, &retryhttp.Transport{Policy: fast}).Post(srv.URL+"/charge", "application/json", strings.NewReader(`{"amount":100}`))
			if err == nil {
				resp.Body.Close()
			}
			rt.AssertAttempts(t, srv.Requests(), 1)
		}
	})
}

func TestScenarioPOSTWithInjectedKey(t *testing.T) {
	protocols(t, func(t *testing.T, h2 bool) {
		srv := rt.Start(t, rt.Script{"/charge": {rt.Status(503), rt.Reset(), rt.Forward()}}, rt.Options{HTTP2: h2})
		body := `{"amount":100,"currency":"EUR"}`
		resp, err := client(t, srv, &retryhttp.Transport{Policy: fast, InjectIdempotencyKey: true}).
			Post(srv.URL+"/charge", "application/json", strings.NewReader(body))
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, 200, resp.StatusCode)
		reqs := srv.Requests()
		rt.AssertAttempts(t, reqs, 3)
		rt.AssertSameIdempotencyKey(t, reqs)
		for _, r := range reqs {
			assert.Equal(t, body, string(r.Body), "body bytes identical on every attempt")
		}
		srv.Effects.AssertExactlyOnce(t, 1)
	})
}

// Without a server that honours the key, a dropped response still means a
// second effect: the client half alone cannot prevent it.
func TestScenarioDroppedResponseNeedsTheServerHalf(t *testing.T) {
	srv := rt.Start(t, rt.Script{"/charge": {rt.DropResponse(), rt.Forward()}}, rt.Options{})
	resp, err := client(t, srv, &retryhttp.Transport{Policy: fast, InjectIdempotencyKey: true}).
		Post(srv.URL+"/charge", "application/json", strings.NewReader("{}"))
	require.NoError(t, err)
	resp.Body.Close()
	rt.AssertSameIdempotencyKey(t, srv.Requests())
	assert.Equal(t, 2, srv.Effects.Total(), "the server ignored the key and acted twice")
}

func TestScenarioBufferedBodyWithoutGetBody(t *testing.T) {
	protocols(t, func(t *testing.T, h2 bool) {
		srv := rt.Start(t, rt.Script{"/": {rt.Status(502), rt.Status(200)}}, rt.Options{HTTP2: h2})
		c := client(t, srv, &retryhttp.Transport{Policy: fast})
		req, err := http.NewRequest("PUT", srv.URL+"/", nil)
		require.NoError(t, err)
		req.Body, req.ContentLength = io.NopCloser(strings.NewReader("some bytes")), 10
		resp, err := c.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		for _, r := range srv.Requests() {
			assert.Equal(t, "some bytes", string(r.Body))
		}
		rt.AssertAttempts(t, srv.Requests(), 2)
	})
}

func TestScenarioCancelMidWait(t *testing.T) {
	protocols(t, func(t *testing.T, h2 bool) {
		srv := rt.Start(t, rt.Script{"/": {rt.Status(503)}}, rt.Options{HTTP2: h2})
		p := retryhttp.Policy{BaseDelay: time.Hour, MaxDelay: time.Hour, MaxElapsed: 2 * time.Hour, Jitter: retryhttp.JitterNone}
		c := client(t, srv, &retryhttp.Transport{Policy: p})
		ctx, cancel := context.WithCancel(t.Context())
		trace := &httptrace.ClientTrace{GotFirstResponseByte: func() { time.AfterFunc(20*time.Millisecond, cancel) }}
		req, err := http.NewRequestWithContext(httptrace.WithClientTrace(ctx, trace), "GET", srv.URL+"/", nil)
		require.NoError(t, err)
		start := time.Now()
		_, err = c.Do(req)
		assert.ErrorIs(t, err, context.Canceled)
		assert.Less(t, time.Since(start), 5*time.Second)
		rt.AssertAttempts(t, srv.Requests(), 1)
	})
}

func TestScenarioClientTimeout(t *testing.T) {
	srv := rt.Start(t, rt.Script{"/": {rt.Status(503)}}, rt.Options{})
	p := retryhttp.Policy{BaseDelay: time.Hour, MaxDelay: time.Hour, MaxElapsed: 2 * time.Hour, Jitter: retryhttp.JitterNone}
	c := client(t, srv, &retryhttp.Transport{Policy: p})
	c.Timeout = 5 * time.Second
	start := time.Now()
	resp, err := c.Get(srv.URL + "/")
	require.NoError(t, err, "a wait past the client's deadline is not started: the 503 comes back")
	resp.Body.Close()
	assert.Equal(t, 503, resp.StatusCode)
	assert.Less(t, time.Since(start), time.Second)
}

func TestScenarioRedirectsAndTrace(t *testing.T) {
	protocols(t, func(t *testing.T, h2 bool) {
		srv := rt.Start(t, rt.Script{
			"/old": {rt.Status(503), rt.Respond(302, http.Header{"Location": {"/new"}}, "")},
			"/new": {rt.Status(503), rt.Status(200)},
		}, rt.Options{HTTP2: h2})
		var conns atomic.Int32
		ctx := httptrace.WithClientTrace(t.Context(), &httptrace.ClientTrace{GotConn: func(httptrace.GotConnInfo) { conns.Add(1) }})
		req, err := http.NewRequestWithContext(ctx, "GET", srv.URL+"/old", nil)
		require.NoError(t, err)
		resp, err := client(t, srv, &retryhttp.Transport{Policy: fast}).Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, 200, resp.StatusCode)
		assert.Equal(t, "/new", resp.Request.URL.Path)
		assert.Len(t, srv.Requests(), 4)
		assert.Equal(t, int32(4), conns.Load(), "the trace sees every attempt")
	})
}

func TestScenarioCertificateErrorNotRetried(t *testing.T) {
	srv := rt.Start(t, rt.Script{"/": {rt.Status(200)}}, rt.Options{HTTP2: true})
	tr := &retryhttp.Transport{Policy: fast, Base: &http.Transport{}} // does not trust the test CA
	t.Cleanup(tr.CloseIdleConnections)
	_, err := (&http.Client{Transport: tr}).Get(srv.URL + "/")
	var re *retryhttp.RetryError
	require.ErrorAs(t, err, &re)
	assert.Equal(t, 1, re.Attempts)
	assert.Equal(t, retryhttp.ReasonNotRetryable, re.Reason)
	assert.Empty(t, srv.Requests())
}

func TestScenarioUnsupportedSchemeNotRetried(t *testing.T) {
	var calls atomic.Int32
	base := &http.Transport{}
	tr := &retryhttp.Transport{Policy: fast, Base: roundTripCounter{base, &calls}}
	_, err := (&http.Client{Transport: tr}).Get("gopher://127.0.0.1/")
	require.Error(t, err)
	assert.Equal(t, int32(1), calls.Load())
	var re *retryhttp.RetryError
	assert.True(t, errors.As(err, &re))
}

type roundTripCounter struct {
	rt    http.RoundTripper
	calls *atomic.Int32
}

func (c roundTripCounter) RoundTrip(r *http.Request) (*http.Response, error) {
	c.calls.Add(1)
	return c.rt.RoundTrip(r)
}

func TestScenarioInvalidHeaderNotRetried(t *testing.T) {
	srv := rt.Start(t, rt.Script{"/": {rt.Status(200)}}, rt.Options{})
	req, err := http.NewRequest("GET", srv.URL+"/", nil)
	require.NoError(t, err)
	req.Header["Bad Header"] = []string{"x"}
	_, err = client(t, srv, &retryhttp.Transport{Policy: fast}).Do(req)
	var re *retryhttp.RetryError
	require.ErrorAs(t, err, &re)
	assert.Equal(t, 1, re.Attempts)
	assert.Empty(t, srv.Requests())
}

// A discarded response is drained and closed, so the next attempt reuses
// its keep-alive connection instead of dialling again.
func TestScenarioDiscardedResponseFreesConnection(t *testing.T) {
	srv := rt.Start(t, rt.Script{"/": {rt.Respond(503, nil, strings.Repeat("e", 1000)), rt.Status(200)}}, rt.Options{})
	var reused []bool
	ctx := httptrace.WithClientTrace(t.Context(), &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) { reused = append(reused, i.Reused) }})
	req, err := http.NewRequestWithContext(ctx, "GET", srv.URL+"/", nil)
	require.NoError(t, err)
	resp, err := client(t, srv, &retryhttp.Transport{Policy: fast}).Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, []bool{false, true}, reused)
}

// The caller's request is left as it was: header, body, length, URL.
func TestScenarioCallerRequestUntouched(t *testing.T) {
	srv := rt.Start(t, rt.Script{"/": {rt.Status(503), rt.Status(200)}}, rt.Options{})
	req, err := http.NewRequest("POST", srv.URL+"/?q=1", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer x")
	req.Body, req.ContentLength = io.NopCloser(strings.NewReader("abc")), 3
	before := *req
	beforeHeader := req.Header.Clone()
	resp, err := client(t, srv, &retryhttp.Transport{Policy: fast, InjectIdempotencyKey: true}).Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	rt.AssertAttempts(t, srv.Requests(), 2)
	assert.Equal(t, beforeHeader, req.Header)
	assert.Equal(t, before.Body, req.Body)
	assert.Equal(t, before.ContentLength, req.ContentLength)
	assert.Equal(t, before.URL.String(), req.URL.String())
	assert.Nil(t, req.GetBody)
}

// A request sent once and not retried fails as net/http would have failed
// it: the same text through http.Client, the same errors.Is; the
// Transport's detail is still there for errors.As.
func TestUnretriedErrorReadsAsNetHTTPs(t *testing.T) {
	post := func(wrap func(http.RoundTripper) http.RoundTripper) error {
		srv := rt.Start(t, rt.Script{"/": {rt.Hangup()}}, rt.Options{})
		// A POST without a key, its connection closed without an answer.
		_, err := (&http.Client{Transport: wrap(srv.Transport())}).Post(srv.URL+"/", "text/plain", strings.NewReader("x"))
		require.Error(t, err)
		return errors.New(strings.ReplaceAll(err.Error(), srv.URL, "URL"))
	}
	want := post(func(base http.RoundTripper) http.RoundTripper { return base })
	var got error
	post(func(base http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(r *http.Request) (*http.Response, error) {
			resp, err := (&retryhttp.Transport{Base: base}).RoundTrip(r)
			got = err
			return resp, err
		})
	})
	gotText := post(func(base http.RoundTripper) http.RoundTripper { return &retryhttp.Transport{Base: base} })
	assert.Equal(t, want.Error(), gotText.Error(), "the same text")
	assert.ErrorIs(t, got, io.EOF)
	var re *retryhttp.RetryError
	require.ErrorAs(t, got, &re)
	assert.Equal(t, 1, re.Attempts)
	assert.Equal(t, retryhttp.ReasonNotRetryable, re.Reason)
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

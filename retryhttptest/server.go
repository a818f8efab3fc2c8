// Package retryhttptest makes the failure branch of retry code a one-liner
// in go test: a scripted flaky HTTP server, a record of what it saw, and
// assertions on the properties that matter (how many attempts, one
// idempotency key, waits within a backoff range, Retry-After honoured,
// exactly one side effect).
//
// A retry pattern never tested against a failing server is a guess.
//
//	srv := retryhttptest.Start(t, retryhttptest.Script{
//		"/": {retryhttptest.Status(503), retryhttptest.Status(503), retryhttptest.Status(200)},
//	}, retryhttptest.Options{})
//	client := &http.Client{Transport: &retryhttp.Transport{Base: srv.Transport()}}
package retryhttptest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/retryhttp/retryhttp/internal/wire"
)

// Script gives each path its steps: request i on the path gets step i, and
// the last step repeats. The path "*" serves every path without its own
// steps; a path with neither gets 404.
type Script map[string][]Step

// Options are the server's settings; the zero value serves HTTP/1.1 and
// counts side effects in Server.Effects.
type Options struct {
	// Handler runs for Forward and DropResponse steps. nil means
	// Server.Effects.Handler(200, "ok").
	Handler http.Handler
	// HTTP2 serves HTTP/2 over TLS; Server.Transport speaks it.
	HTTP2 bool
}

// Server is a scripted flaky HTTP server on loopback.
type Server struct {
	// URL is the base URL, http://127.0.0.1:port (https with HTTP2).
	URL string
	// Effects counts the side effects of the default Handler.
	Effects *Effects

	ts      *httptest.Server
	script  Script
	handler http.Handler

	mu   sync.Mutex
	next map[string]int // path -> index of the next step
	log  []Request
}

// Request is what the server saw of one request, and what it did.
type Request struct {
	At     time.Time // when the request headers were read
	Method string
	Path   string
	Header http.Header
	Body   []byte
	// Step is the index of the step that served it; Did describes it
	// ("503", "forward", "reset", ...).
	Step int
	Did  string
	// RetryAfter is the Retry-After the server answered with, if any.
	RetryAfter string
}

// IdempotencyKey is the request's idempotency key, from Idempotency-Key or,
// failing that, X-Idempotency-Key (the names the Transport and the
// middleware honour), as sent.
func (r Request) IdempotencyKey() string {
	k, _ := wire.Key(r.Header)
	return k
}

// NewServer validates the script and starts the server. A bad script (an
// empty route, a zero Step, a negative delay, a status out of range) is an
// error naming the route and the step.
func NewServer(script Script, opts Options) (*Server, error) {
	if len(script) == 0 {
		return nil, errors.New("retryhttptest: empty script")
	}
	for path, steps := range script {
		if len(steps) == 0 {
			return nil, fmt.Errorf("retryhttptest: route %q has no steps", path)
		}
		for i, s := range steps {
			if err := s.validate(); err != nil {
				return nil, fmt.Errorf("retryhttptest: route %q step %d: %w", path, i, err)
			}
		}
	}
	s := &Server{Effects: &Effects{}, script: script, handler: opts.Handler, next: map[string]int{}}
	if s.handler == nil {
		s.handler = s.Effects.Handler(http.StatusOK, "ok")
	}
	s.ts = httptest.NewUnstartedServer(http.HandlerFunc(s.serve))
	if opts.HTTP2 {
		s.ts.EnableHTTP2 = true
		s.ts.StartTLS()
	} else {
		s.ts.Start()
	}
	s.URL = s.ts.URL
	return s, nil
}

// Start is NewServer for tests: a bad script fails tb at once, and the
// server is closed when the test ends.
func Start(tb testing.TB, script Script, opts Options) *Server {
	tb.Helper()
	s, err := NewServer(script, opts)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(s.Close)
	return s
}

// Transport returns a fresh base transport that trusts the server's
// certificate and speaks HTTP/2 when the server does; set it as
// retryhttp.Transport.Base.
func (s *Server) Transport() http.RoundTripper {
	return s.ts.Client().Transport.(*http.Transport).Clone()
}

// Close shuts the server down, closing client connections.
func (s *Server) Close() {
	s.ts.CloseClientConnections()
	s.ts.Close()
}

// Requests returns what the server saw, in order of arrival.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.log...)
}

// RequestsTo returns what the server saw on one path.
func (s *Server) RequestsTo(path string) []Request {
	var out []Request
	for _, r := range s.Requests() {
		if r.Path == path {
			out = append(out, r)
		}
	}
	return out
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	at := time.Now()
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return // the client went away mid-body
	}
	steps, ok := s.script[r.URL.Path]
	route := r.URL.Path
	if !ok {
		steps, ok = s.script["*"]
		route = "*"
	}
	step := Status(http.StatusNotFound)
	i := -1
	s.mu.Lock()
	if ok {
		i = s.next[route]
		s.next[route]++
		step = steps[min(i, len(steps)-1)]
	}
	s.log = append(s.log, Request{
		At: at, Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Body: body,
		Step: i, Did: step.String(), RetryAfter: step.header.Get("Retry-After"),
	})
	s.mu.Unlock()

	if step.delay > 0 {
		t := time.NewTimer(step.delay)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			return
		}
	}
	switch step.kind {
	case kindRespond:
		for k, v := range step.header {
			w.Header()[k] = v
		}
		w.Header().Set("Content-Length", strconv.Itoa(len(step.body)))
		w.WriteHeader(step.status)
		io.WriteString(w, step.body)
	case kindForward:
		r.Body = io.NopCloser(bytes.NewReader(body))
		s.handler.ServeHTTP(w, r)
	case kindReset:
		reset(w, r, true)
	case kindHangup:
		reset(w, r, false)
	case kindDrop:
		r.Body = io.NopCloser(bytes.NewReader(body))
		s.handler.ServeHTTP(httptest.NewRecorder(), r)
		reset(w, r, true)
	case kindPartial:
		w.Header().Set("Content-Length", strconv.Itoa(len(step.body)))
		w.WriteHeader(step.status)
		io.WriteString(w, step.body[:step.cut])
		http.NewResponseController(w).Flush()
		panic(http.ErrAbortHandler)
	}
}

// reset ends the exchange without a response: on HTTP/1.1 a TCP RST (rst),
// so the client sees ECONNRESET, or a plain close, so it sees EOF; on
// HTTP/2 an RST_STREAM, where the connection is shared with other requests
// and only the stream may be cut.
func reset(w http.ResponseWriter, r *http.Request, rst bool) {
	if r.ProtoMajor == 1 {
		if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
			if tcp, ok := underlyingTCP(conn); ok && rst {
				tcp.SetLinger(0)
			}
			conn.Close()
			return
		}
	}
	panic(http.ErrAbortHandler)
}

func underlyingTCP(c net.Conn) (*net.TCPConn, bool) {
	if nc, ok := c.(interface{ NetConn() net.Conn }); ok {
		c = nc.NetConn()
	}
	tcp, ok := c.(*net.TCPConn)
	return tcp, ok
}

// Effects counts side effects by Idempotency-Key, to check that retries
// caused each effect exactly once. Safe for concurrent use; the zero value
// is ready.
type Effects struct {
	mu    sync.Mutex
	byKey map[string]int
	total int
}

// Handler returns a handler that records one side effect under the
// request's idempotency key (Idempotency-Key or X-Idempotency-Key; "" when
// it has none) and answers status and body. Wrap it in the idempotency middleware to test the server half.
func (e *Effects) Handler(status int, body string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e.mu.Lock()
		if e.byKey == nil {
			e.byKey = map[string]int{}
		}
		k, _ := wire.Key(r.Header)
		e.byKey[k]++
		e.total++
		e.mu.Unlock()
		w.WriteHeader(status)
		io.WriteString(w, body)
	})
}

// Count is the number of effects recorded under key.
func (e *Effects) Count(key string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.byKey[key]
}

// Total is the number of effects recorded.
func (e *Effects) Total() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.total
}

// Keys lists the keys with at least one effect, sorted.
func (e *Effects) Keys() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	keys := make([]string, 0, len(e.byKey))
	for k := range e.byKey {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

package retryhttp

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// step is one scripted outcome of the in-memory base: a status (with
// headers) or an error.
type step struct {
	status int
	header http.Header
	err    error
}

func status(code int) step { return step{status: code} }

func retryAfter(code int, v string) step {
	return step{status: code, header: http.Header{"Retry-After": {v}}}
}

func fail(err error) step { return step{err: err} }

// seen is what the in-memory base saw of one attempt.
type seen struct {
	at     time.Time
	method string
	header http.Header
	body   string
}

// scriptBase is an in-memory http.RoundTripper that answers attempt i with
// steps[i], repeating the last step. It touches no socket, so it runs inside
// a synctest bubble. It records every attempt and every response body it
// handed out, to check they were closed.
type scriptBase struct {
	mu     sync.Mutex
	steps  []step
	calls  []seen
	bodies []*trackedBody
}

func script(steps ...step) *scriptBase { return &scriptBase{steps: steps} }

func (s *scriptBase) RoundTrip(req *http.Request) (*http.Response, error) {
	var body string
	if req.Body != nil {
		b, err := io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, err
		}
		body = string(b)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, seen{at: time.Now(), method: req.Method, header: req.Header.Clone(), body: body})
	st := s.steps[min(len(s.calls), len(s.steps))-1]
	if st.err != nil {
		return nil, st.err
	}
	tb := &trackedBody{Reader: bytes.NewReader([]byte("attempt " + strconv.Itoa(len(s.calls))))}
	s.bodies = append(s.bodies, tb)
	h := st.header.Clone()
	if h == nil {
		h = http.Header{}
	}
	return &http.Response{StatusCode: st.status, Header: h, Body: tb, Request: req, ProtoMajor: 1, ProtoMinor: 1}, nil
}

func (s *scriptBase) attempts() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.calls)
}

func (s *scriptBase) seen() []seen {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]seen(nil), s.calls...)
}

// gaps returns the time between consecutive attempts.
func (s *scriptBase) gaps() []time.Duration {
	calls := s.seen()
	var d []time.Duration
	for i := 1; i < len(calls); i++ {
		d = append(d, calls[i].at.Sub(calls[i-1].at))
	}
	return d
}

// closedBodies reports, per response handed out, whether it was closed.
func (s *scriptBase) closedBodies() []bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	var c []bool
	for _, b := range s.bodies {
		c = append(c, b.isClosed())
	}
	return c
}

type trackedBody struct {
	*bytes.Reader
	mu     sync.Mutex
	closed bool
}

func (b *trackedBody) Close() error {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	return nil
}

func (b *trackedBody) isClosed() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.closed
}

// closeTracker is a request body that records whether it was closed.
type closeTracker struct {
	io.Reader
	closed bool
}

func (c *closeTracker) Close() error { c.closed = true; return nil }

// noWait is a policy whose waits are all zero, for tests about what is
// retried rather than when.
var noWait = Policy{BaseDelay: time.Nanosecond, MaxDelay: time.Nanosecond, Jitter: JitterNone}

// retryHook is a Hook told of retry decisions alone (EventRetry and
// EventGiveUp), what most tests record.
func retryHook(f func(Event)) Hook {
	return HookFunc(func(_ context.Context, e Event) {
		if e.Kind == EventRetry || e.Kind == EventGiveUp {
			f(e)
		}
	})
}

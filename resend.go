package retryhttp

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"sync/atomic"

	"github.com/retryhttp/retryhttp/internal/wire"
)

// wireSends counts how many times net/http wrote one attempt's request.
//
// net/http's Transport resends a request itself, inside one RoundTrip, when
// a reused HTTP/1 connection turns out dead after the request was written
// but before any byte of a response came back (the server closed an idle
// connection as the request arrived). It does this only for requests it
// deems replayable: GET, HEAD, OPTIONS, TRACE, or any method with an
// Idempotency-Key, with a body it can rewind. The server sees each of those
// sends. The Transport counts them as attempts (in the metrics, toward
// MaxAttempts and against the budget) by tracing the writes.
//
// A request with a body is resent only after net/http asks its GetBody for
// the body again: there the Transport withholds any resend past the
// attempts left, so that MaxAttempts bounds what the server sees (and an
// upper layer's S attempts over the Transport's R make at most R + S − 1
// sends). A request without a body net/http resends without asking; that
// one cannot be withheld.
type wireSends struct {
	trace   httptrace.ClientTrace
	n       atomic.Int32
	allowed int32 // the sends this attempt may make: the attempts left
	getBody func() (io.ReadCloser, error)
}

func (w *wireSends) wrote(info httptrace.WroteRequestInfo) {
	if info.Err == nil {
		w.n.Add(1)
	}
}

// extra is the number of sends beyond the first.
func (w *wireSends) extra() int { return max(0, int(w.n.Load())-1) }

// rewind is the GetBody net/http calls before it resends: the body again
// while a send is left, and errResendWithheld once the sends written reach
// the attempts left.
func (w *wireSends) rewind() (io.ReadCloser, error) {
	if w.n.Load() >= w.allowed {
		return nil, errResendWithheld
	}
	return w.getBody()
}

// errResendWithheld is what a RoundTrip returns when net/http would have
// sent the request again by itself, past MaxAttempts: the connection was
// lost after the request was written, as with an unexpected EOF.
var errResendWithheld = fmt.Errorf("retryhttp: connection lost after the request was written; net/http's own resend withheld at MaxAttempts: %w", io.ErrUnexpectedEOF)

// traceSends returns req with a trace that counts its sends, when base is
// a net/http Transport that may resend it, and a GetBody that withholds a
// resend past the allowed sends (at least 1); otherwise req itself and
// nil, at no cost.
func traceSends(base http.RoundTripper, req *http.Request, allowed int) (*http.Request, *wireSends) {
	if _, ok := base.(*http.Transport); !ok || !netHTTPReplayable(req) {
		return req, nil
	}
	w := &wireSends{allowed: int32(allowed)}
	w.trace.WroteRequest = w.wrote
	sreq := req.WithContext(httptrace.WithClientTrace(req.Context(), &w.trace))
	if sreq.GetBody != nil {
		w.getBody = sreq.GetBody
		sreq.GetBody = w.rewind
	}
	return sreq, w
}

// netHTTPReplayable is net/http's own rule for resending (Request.isReplayable).
func netHTTPReplayable(req *http.Request) bool {
	if req.Body != nil && req.Body != http.NoBody && req.GetBody == nil {
		return false
	}
	switch req.Method {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
		return true
	}
	return wire.HasKey(req.Header)
}

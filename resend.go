package retryhttp

import (
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
type wireSends struct {
	trace httptrace.ClientTrace
	n     atomic.Int32
}

func (w *wireSends) wrote(info httptrace.WroteRequestInfo) {
	if info.Err == nil {
		w.n.Add(1)
	}
}

// extra is the number of sends beyond the first.
func (w *wireSends) extra() int { return max(0, int(w.n.Load())-1) }

// traceSends returns req with a trace that counts its sends, when base is
// a net/http Transport that may resend it; otherwise req itself and nil, at
// no cost.
func traceSends(base http.RoundTripper, req *http.Request) (*http.Request, *wireSends) {
	if _, ok := base.(*http.Transport); !ok || !netHTTPReplayable(req) {
		return req, nil
	}
	w := &wireSends{}
	w.trace.WroteRequest = w.wrote
	return req.WithContext(httptrace.WithClientTrace(req.Context(), &w.trace)), w
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

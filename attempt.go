package retryhttp

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/retryhttp/retryhttp/internal/wire"
)

// This file holds what makes one attempt: its request (the caller's, or a
// copy with the body again), its send (with the Policy's timeouts), and
// the count of net/http's own resends of it.

// preparer makes each attempt's request of a RoundTrip: the caller's
// request, the header every attempt carries (with any injected key or
// priority), its
// body, the attempt header and BeforeAttempt. The attempt loop and the
// hedges of a request share one.
type preparer struct {
	req           *http.Request
	header        http.Header
	rewritten     bool // header is a copy of the caller's, with a key or a priority added
	body          replayBody
	attemptHeader string
	before        func(*http.Request) error // Transport.BeforeAttempt
	asIs          bool                      // the first attempt is the caller's request itself (see checkAsIs)
}

// checkAsIs notes, once the preparer is filled, whether the first attempt
// can be the caller's own request: nothing about it changes (its header,
// its body, the attempt header) and BeforeAttempt, which may change it,
// is not set. That is the common first attempt, sent with no allocation.
func (p *preparer) checkAsIs() {
	p.asIs = p.body.buf == nil && p.body.head == nil && !p.rewritten && p.attemptHeader == "" && p.before == nil
}

// prepare returns attempt n's request, passed through BeforeAttempt, or
// the reason it cannot be had: ReasonBody (the body cannot be had again)
// or ReasonBeforeAttempt.
func (p *preparer) prepare(n int) (*http.Request, Reason, error) {
	if n == 1 && p.asIs {
		return p.req, ReasonNone, nil
	}
	return p.prepareCopy(n)
}

// prepareCopy is prepare for an attempt that is a copy of the caller's
// request.
func (p *preparer) prepareCopy(n int) (*http.Request, Reason, error) {
	areq, err := p.request(n)
	if err != nil {
		return nil, ReasonBody, err
	}
	if p.before != nil {
		if err := p.before(areq); err != nil {
			closeRequestBody(areq)
			return nil, ReasonBeforeAttempt, err
		}
	}
	return areq, ReasonNone, nil
}

// request returns the request to send on attempt n, a shallow copy of
// the caller's with this attempt's header and body. A retry's copy
// carries its attempt number in its context, for the layers below (see
// AttemptFromContext), and in the attempt header if set. With
// BeforeAttempt the copy has a header of its own, for it to change.
func (p *preparer) request(n int) (*http.Request, error) {
	ownHeader := p.before != nil
	req, header, body := p.req, p.header, &p.body
	rc, getBody, err := body.forAttempt(n)
	if err != nil {
		return nil, err
	}
	var r *http.Request
	if n > 1 {
		r = req.WithContext(withAttempt(req.Context(), n))
	} else {
		r = new(http.Request)
		*r = *req
	}
	if p.attemptHeader != "" || ownHeader {
		header = header.Clone()
		if header == nil {
			header = make(http.Header, 1)
		}
	}
	if p.attemptHeader != "" {
		header.Set(p.attemptHeader, strconv.Itoa(n))
	}
	r.Header = header
	r.Body = rc
	r.GetBody = getBody
	if body.buf != nil { // a stream read whole (BufferStreams) is sent with its length
		r.ContentLength = int64(len(body.buf))
	}
	return r, nil
}

// send makes one attempt. With a timeout, the attempt's context is
// cancelled if headers have not arrived in time, and released when the
// caller closes the response body. With an exchange timeout, the same
// happens to an attempt whose body has not been read by then.
func send(base http.RoundTripper, req *http.Request, timeout, exchange time.Duration) (*http.Response, error) {
	if timeout <= 0 && exchange <= 0 {
		return base.RoundTrip(req)
	}
	ctx, cancel := context.WithCancelCause(req.Context())
	expire := func() { cancel(ErrAttemptTimeout) }
	var headers, whole *time.Timer
	if timeout > 0 {
		headers = time.AfterFunc(timeout, expire)
	}
	if exchange > 0 {
		whole = time.AfterFunc(exchange, expire)
	}
	resp, err := base.RoundTrip(req.WithContext(ctx))
	late := headers != nil && !headers.Stop()
	if late || err != nil && context.Cause(ctx) == ErrAttemptTimeout {
		// A timer fired: even if headers made it, the body is cancelled.
		if resp != nil {
			discard(resp)
		}
		stopTimer(whole)
		cancel(nil)
		return nil, ErrAttemptTimeout
	}
	if err != nil {
		stopTimer(whole)
		cancel(nil)
		return nil, err
	}
	if whole != nil {
		resp.Body = &timedBody{ReadCloser: resp.Body, ctx: ctx, cancel: cancel, timer: whole}
		return resp, nil
	}
	resp.Body = wrapCancel(resp.Body, cancel)
	return resp, nil
}

func stopTimer(t *time.Timer) {
	if t != nil {
		t.Stop()
	}
}

// timedBody is the body of an attempt under Policy.ExchangeTimeout: a
// read that fails because the timer fired fails with ErrAttemptTimeout,
// and closing it stops the timer and releases the attempt's context.
type timedBody struct {
	io.ReadCloser
	ctx    context.Context
	cancel context.CancelCauseFunc
	timer  *time.Timer
}

func (b *timedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && err != io.EOF && context.Cause(b.ctx) == ErrAttemptTimeout {
		err = ErrAttemptTimeout
	}
	return n, err
}

func (b *timedBody) Close() error {
	b.timer.Stop()
	err := b.ReadCloser.Close()
	b.cancel(nil)
	return err
}

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

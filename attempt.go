package retryhttp

import (
	"context"
	"net/http"
	"strconv"
	"time"
)

// preparer holds what prepareAttempt needs, for the hedges of a request.
type preparer struct {
	req           *http.Request
	header        http.Header
	injected      bool
	body          replayBody
	attemptHeader string
	before        func(*http.Request) error // Transport.BeforeAttempt
}

func (p *preparer) prepare(n int) (*http.Request, Reason, error) {
	return prepareAttempt(p.req, p.header, p.injected, p.body, n, p.attemptHeader, p.before)
}

// prepareAttempt returns attempt n's request, passed through before
// (BeforeAttempt), or the reason it cannot be had: ReasonBody (the body
// cannot be had again) or ReasonBeforeAttempt.
func prepareAttempt(req *http.Request, header http.Header, injected bool, body replayBody, n int, attemptHeader string, before func(*http.Request) error) (*http.Request, Reason, error) {
	areq, err := attemptRequest(req, header, injected, body, n, attemptHeader, before != nil)
	if err != nil {
		return nil, ReasonBody, err
	}
	if before != nil {
		if err := before(areq); err != nil {
			closeRequestBody(areq)
			return nil, ReasonBeforeAttempt, err
		}
	}
	return areq, ReasonNone, nil
}

// attemptRequest returns the request to send on attempt n: the caller's
// own when nothing about it changes (the common first attempt, no
// allocation), otherwise a shallow copy with this attempt's header and
// body. A retry's copy carries its attempt number in its context, for the
// layers below (see AttemptFromContext), and in attemptHeader if set.
// ownHeader asks for a copy with a header of its own, for BeforeAttempt.
func attemptRequest(req *http.Request, header http.Header, injected bool, body replayBody, n int, attemptHeader string, ownHeader bool) (*http.Request, error) {
	if n == 1 && body.buf == nil && !injected && attemptHeader == "" && !ownHeader {
		return req, nil
	}
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
	if attemptHeader != "" || ownHeader {
		header = header.Clone()
		if header == nil {
			header = make(http.Header, 1)
		}
	}
	if attemptHeader != "" {
		header.Set(attemptHeader, strconv.Itoa(n))
	}
	r.Header = header
	r.Body = rc
	r.GetBody = getBody
	return r, nil
}

// send makes one attempt. With a timeout, the attempt's context is
// cancelled if headers have not arrived in time, and released when the
// caller closes the response body.
func send(base http.RoundTripper, req *http.Request, timeout time.Duration) (*http.Response, error) {
	if timeout <= 0 {
		return base.RoundTrip(req)
	}
	ctx, cancel := context.WithCancelCause(req.Context())
	timer := time.AfterFunc(timeout, func() { cancel(ErrAttemptTimeout) })
	resp, err := base.RoundTrip(req.WithContext(ctx))
	if !timer.Stop() {
		// The timer fired: even if headers made it, the body is cancelled.
		if resp != nil {
			discard(resp)
		}
		cancel(nil)
		return nil, ErrAttemptTimeout
	}
	if err != nil {
		cancel(nil)
		return nil, err
	}
	resp.Body = wrapCancel(resp.Body, cancel)
	return resp, nil
}

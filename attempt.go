package retryhttp

import (
	"context"
	"net/http"
	"strconv"
	"time"
)

// preparer makes each attempt's request of one RoundTrip: the caller's
// request, the header every attempt sends (with its key), its replayable
// body, and the Transport's AttemptHeader and BeforeAttempt.
type preparer struct {
	req           *http.Request
	header        http.Header
	injected      bool
	body          replayBody
	attemptHeader string
	before        func(*http.Request) error // Transport.BeforeAttempt
}

// prepare returns attempt n's request, passed through BeforeAttempt, or
// the reason it cannot be had: ReasonBody (the body cannot be had again)
// or ReasonBeforeAttempt.
func (p *preparer) prepare(n int) (*http.Request, Reason, error) {
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

// request returns the request to send on attempt n: the caller's own when
// nothing about it changes (the common first attempt, no allocation),
// otherwise a shallow copy with this attempt's header and body. A retry's
// copy carries its attempt number in its context, for the layers below
// (see AttemptFromContext), and in the attempt header if set; with
// BeforeAttempt, every copy has a header of its own, for it to change.
func (p *preparer) request(n int) (*http.Request, error) {
	ownHeader := p.before != nil
	if n == 1 && p.body.buf == nil && !p.injected && p.attemptHeader == "" && !ownHeader {
		return p.req, nil
	}
	rc, getBody, err := p.body.forAttempt(n)
	if err != nil {
		return nil, err
	}
	var r *http.Request
	if n > 1 {
		r = p.req.WithContext(withAttempt(p.req.Context(), n))
	} else {
		r = new(http.Request)
		*r = *p.req
	}
	header := p.header
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

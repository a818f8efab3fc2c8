package retryhttp

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"time"
)

// replayBody produces the request body of each attempt.
//
// Three cases, cheapest first: no body at all; a body the caller can
// recreate (GetBody, set by http.NewRequest for bytes and strings readers),
// used as is with no copy; and a body of known length up to
// Policy.MaxBufferedBody, read once into memory. Anything else (longer, or
// of unknown length, such as a pipe) is streamed once and never buffered,
// since holding a large upload in memory to make a retry possible would turn
// a retry layer into a memory problem.
type replayBody struct {
	req        *http.Request // the caller's
	buf        []byte        // the buffered copy, or nil
	head       []byte        // what was read of a stream too long to buffer, sent before the rest of it
	replayable bool
}

// load prepares req's body for replay under p, into b. It reads the body
// only when it must buffer it (p.MaxAttempts allows a retry and the body
// has at most p.MaxBufferedBody bytes), or when p.BufferStreams asks it to
// try a body of unknown length; a read error is returned and nothing is
// sent. It fills b, zero, in place: the exchange holds it, and most
// requests take the first branch.
func (b *replayBody) load(req *http.Request, p *Policy) error {
	b.req = req
	limit, buffer := p.MaxBufferedBody, p.MaxAttempts > 1
	switch {
	case req.Body == nil || req.Body == http.NoBody, req.GetBody != nil:
		b.replayable = true
	case buffer && req.ContentLength > 0 && req.ContentLength <= limit:
		buf, err := readExactly(req.Body, req.ContentLength)
		req.Body.Close()
		if err != nil {
			return err
		}
		b.buf = buf
		b.replayable = true
	case buffer && p.BufferStreams && req.ContentLength <= 0:
		buf, err := io.ReadAll(io.LimitReader(req.Body, limit+1))
		if err != nil {
			req.Body.Close()
			return fmt.Errorf("retryhttp: reading request body: %w", err)
		}
		if int64(len(buf)) > limit { // too long: sent once, streamed
			b.head = buf
			return nil
		}
		req.Body.Close()
		b.buf = append(make([]byte, 0, len(buf)), buf...) // non-nil when empty
		b.replayable = true
	}
	return nil
}

// readExactly reads a body that ContentLength says has n bytes, in one
// allocation, and reports a body that is shorter or longer: net/http would
// refuse to send it, and a copy that silently differed would be worse.
func readExactly(r io.Reader, n int64) ([]byte, error) {
	buf := make([]byte, n)
	got, err := io.ReadFull(r, buf)
	switch {
	case err == io.ErrUnexpectedEOF || err == io.EOF:
		return nil, fmt.Errorf("retryhttp: request body has %d bytes, ContentLength says %d", got, n)
	case err != nil:
		return nil, fmt.Errorf("retryhttp: reading request body: %w", err)
	}
	var one [1]byte
	if m, _ := io.ReadFull(r, one[:]); m > 0 {
		return nil, fmt.Errorf("retryhttp: request body is longer than ContentLength %d", n)
	}
	return buf, nil
}

// forAttempt returns the body and GetBody to send on attempt n (1-based).
// The first attempt sends the caller's own body unless it was buffered.
func (b replayBody) forAttempt(n int) (io.ReadCloser, func() (io.ReadCloser, error), error) {
	switch {
	case b.buf != nil:
		return io.NopCloser(bytes.NewReader(b.buf)), b.getBuffered, nil
	case b.head != nil:
		return headBody{io.MultiReader(bytes.NewReader(b.head), b.req.Body), b.req.Body}, nil, nil
	case n == 1, b.req.Body == nil || b.req.Body == http.NoBody:
		return b.req.Body, b.req.GetBody, nil
	}
	body, err := b.req.GetBody()
	if err != nil {
		return nil, nil, fmt.Errorf("retryhttp: GetBody: %w", err)
	}
	return body, b.req.GetBody, nil
}

// mayFail reports whether forAttempt can fail on a retry: only GetBody
// can, when the body is not buffered.
func (b replayBody) mayFail() bool {
	return b.buf == nil && b.req.Body != nil && b.req.Body != http.NoBody
}

// headBody is a stream whose first bytes were read ahead: they are sent
// first, and closing it closes the caller's body.
type headBody struct {
	io.Reader
	io.Closer
}

func (b replayBody) getBuffered() (io.ReadCloser, error) {
	return io.NopCloser(bytes.NewReader(b.buf)), nil
}

// closeRequestBody keeps the RoundTripper contract on paths that return
// before handing the body to the base transport.
func closeRequestBody(req *http.Request) {
	if req.Body != nil {
		req.Body.Close()
	}
}

// maxDrain bounds how much of a discarded response body is read so its
// connection can be reused; past that, closing the connection and opening
// another is cheaper. Measured over loopback (BenchmarkDiscardErrorBody):
// draining 256 KiB costs 117 µs against 169 µs for a new TCP connection and
// 2.8 ms for a new TLS one, while at 1 MiB a new TCP connection is cheaper
// (466 µs against 643 µs). Over a real network a new connection costs one
// to three round trips more, and a body of 256 KiB is within one
// bandwidth-delay product of a 100 Mbit/s, 20 ms path: it has mostly
// arrived already.
const maxDrain = 256 << 10

// maxKeep bounds the body of a response kept across a wait that is read
// into memory (see keep): enough for any error page, little enough that
// thousands of requests waiting at once cost little memory.
const maxKeep = 64 << 10

// maxDrainTime bounds the time spent draining a discarded body, since
// bytes alone do not bound it: a server that trickles an error page (512
// bytes every 50 ms) would hold a retry for the 25 s that 256 KiB takes.
// At 100 ms a drain that is still reading has met a body arriving at under
// 2.5 MB/s; a new connection (one to three round trips) is cheaper than
// waiting for the rest, and the wait is small beside any backoff.
const maxDrainTime = 100 * time.Millisecond

// discard drains and closes the body of a response that will not be
// returned to the caller, within maxDrain bytes and maxDrainTime: past
// either the body is closed unread, which closes its connection.
func discard(resp *http.Response) {
	body := resp.Body
	if body == http.NoBody { // net/http's body of a response with no content: nothing to drain, no timer
		body.Close()
		return
	}
	stop := time.AfterFunc(maxDrainTime, func() { body.Close() })
	io.CopyN(io.Discard, body, maxDrain)
	if stop.Stop() {
		body.Close()
	}
}

// keep makes a response that may still be returned after a wait readable
// then without holding its connection meanwhile: up to maxKeep bytes of the
// body are read into memory and, when that is all of it, the connection is
// released. A longer body keeps its connection until the response is
// returned or discarded.
func keep(resp *http.Response) *http.Response {
	if resp.Body == http.NoBody { // net/http's body of a response without content: nothing to read, nothing held
		return resp
	}
	buf, err := io.ReadAll(io.LimitReader(resp.Body, maxKeep+1))
	switch {
	case err != nil:
		resp.Body.Close()
		resp.Body = io.NopCloser(io.MultiReader(bytes.NewReader(buf), errReader{err}))
	case len(buf) <= maxKeep:
		resp.Body.Close()
		resp.Body = io.NopCloser(bytes.NewReader(buf))
	default:
		resp.Body = &prefixedBody{Reader: io.MultiReader(bytes.NewReader(buf), resp.Body), Closer: resp.Body}
	}
	return resp
}

// prefixedBody is a body whose first bytes were read ahead.
type prefixedBody struct {
	io.Reader
	io.Closer
}

// errReader replays a read error after the bytes read before it.
type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

// cancelBody releases an attempt's context when the caller is done with the
// response body, which must stay readable after RoundTrip returns.
type cancelBody struct {
	io.ReadCloser
	cancel context.CancelCauseFunc
}

func (b *cancelBody) Close() error {
	err := b.ReadCloser.Close()
	b.cancel(nil)
	return err
}

// cancelWriteBody keeps the io.Writer of a 101 Switching Protocols body.
type cancelWriteBody struct {
	cancelBody
	io.Writer
}

func wrapCancel(rc io.ReadCloser, cancel context.CancelCauseFunc) io.ReadCloser {
	if w, ok := rc.(io.ReadWriteCloser); ok {
		return &cancelWriteBody{cancelBody{w, cancel}, w}
	}
	return &cancelBody{rc, cancel}
}

// peekedBody is a response body whose first bytes were read for
// ShouldRetry (Transport.PeekBody); reading it yields them again.
type peekedBody struct {
	prefix []byte
	io.Reader
	io.Closer
}

// peek reads up to n bytes of rc ahead.
func peek(rc io.ReadCloser, n int) io.ReadCloser {
	buf := make([]byte, n)
	m, err := io.ReadFull(rc, buf)
	buf = buf[:m]
	var rest io.Reader = rc
	if err != nil && err != io.EOF && err != io.ErrUnexpectedEOF {
		rest = errReader{err}
	}
	return &peekedBody{prefix: buf, Reader: io.MultiReader(bytes.NewReader(buf), rest), Closer: rc}
}

// BodyPrefix returns the bytes of resp's body that the Transport read ahead
// for ShouldRetry (see Transport.PeekBody), or nil. Reading resp.Body still
// yields them.
func BodyPrefix(resp *http.Response) []byte {
	if p, ok := resp.Body.(*peekedBody); ok {
		return p.prefix
	}
	return nil
}

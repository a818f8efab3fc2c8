package idempotency

import (
	"bytes"
	"net/http"
)

// recorder buffers a handler's response so that it is stored before the
// client sees it: in transactional mode the client must not hear of an
// effect that might still roll back. Past limit bytes of body it gives up
// buffering and streams to the client, and the stored record is marked
// TooLarge.
type recorder struct {
	w      http.ResponseWriter
	header http.Header
	status int
	body   bytes.Buffer
	limit  int64

	streaming bool // the limit was passed: everything goes straight to w
	tx        bool // transactional mode: passing the limit is an error
	overflow  bool // tx mode passed the limit; the rest was dropped
}

func newRecorder(w http.ResponseWriter, limit int64, tx bool) *recorder {
	return &recorder{w: w, header: http.Header{}, limit: limit, tx: tx}
}

func (r *recorder) Header() http.Header {
	if r.streaming {
		return r.w.Header()
	}
	return r.header
}

func (r *recorder) WriteHeader(code int) {
	if r.status != 0 || code < 200 {
		return // 1xx and repeated calls: net/http's informational and superfluous cases
	}
	r.status = code
}

func (r *recorder) Write(p []byte) (int, error) {
	if r.status == 0 {
		r.WriteHeader(http.StatusOK)
	}
	if r.streaming {
		return r.w.Write(p)
	}
	if int64(r.body.Len()+len(p)) <= r.limit {
		return r.body.Write(p)
	}
	if r.tx {
		r.overflow = true
		return len(p), nil
	}
	// Stream from here on: send what was buffered, then p.
	r.streaming = true
	r.sendHeader(nil)
	if _, err := r.w.Write(r.body.Bytes()); err != nil {
		return 0, err
	}
	return r.w.Write(p)
}

// Flush is accepted and ignored while buffering: the response is sent
// whole once it has been stored.
func (r *recorder) Flush() {
	if r.streaming {
		http.NewResponseController(r.w).Flush()
	}
}

func (r *recorder) statusCode() int {
	if r.status == 0 {
		return http.StatusOK
	}
	return r.status
}

// sendHeader copies the buffered header (and extra) to the client and
// writes the status.
func (r *recorder) sendHeader(extra http.Header) {
	dst := r.w.Header()
	for k, v := range r.header {
		dst[k] = v
	}
	for k, v := range extra {
		dst[k] = v
	}
	r.w.WriteHeader(r.statusCode())
}

// send delivers the buffered response.
func (r *recorder) send() {
	if r.streaming {
		return
	}
	r.sendHeader(nil)
	r.w.Write(r.body.Bytes())
}

// response is what to store.
func (r *recorder) response() *Response {
	resp := &Response{Status: r.statusCode(), Header: storableHeader(r.header)}
	if r.streaming {
		resp.TooLarge = true
	} else {
		resp.Body = bytes.Clone(r.body.Bytes())
	}
	return resp
}

// hopByHop are the fields that describe one connection, not the response
// (RFC 9110 §7.6.1), plus Date, which a replay sets anew.
var hopByHop = []string{
	"Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization", "Proxy-Connection",
	"Te", "Trailer", "Transfer-Encoding", "Upgrade", "Date",
}

func storableHeader(h http.Header) http.Header {
	c := h.Clone()
	if c == nil {
		return nil
	}
	for _, k := range hopByHop {
		delete(c, k)
	}
	return c
}

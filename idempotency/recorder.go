package idempotency

import (
	"bytes"
	"net/http"
	"strings"
	"sync"
)

// recorder buffers a handler's response so that it is stored before the
// client sees it: in transactional mode the client must not hear of an
// effect that might still roll back. Past limit bytes of body it gives up
// buffering and streams to the client, and the stored record is marked
// TooLarge. Its body buffer is pooled: call free when done.
type recorder struct {
	w      http.ResponseWriter
	header http.Header
	status int
	body   *bytes.Buffer
	limit  int64

	streaming bool // the limit was passed: everything goes straight to w
	tx        bool // transactional mode: passing the limit is an error
	overflow  bool // tx mode passed the limit; the rest was dropped
}

var bufPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// init readies a recorder in place: it lives in a request's exchange.
func (r *recorder) init(w http.ResponseWriter, limit int64, tx bool) {
	*r = recorder{w: w, header: make(http.Header, 4), limit: limit, tx: tx, body: bufPool.Get().(*bytes.Buffer)}
}

// free returns the body buffer to the pool; the recorder must not be used
// after.
func (r *recorder) free() {
	if r.body.Cap() <= 64<<10 { // do not keep a large response's buffer alive
		r.body.Reset()
		bufPool.Put(r.body)
	}
	r.body = nil
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
	r.sendHeader()
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

// sendHeader copies the buffered header to the client and writes the
// status.
func (r *recorder) sendHeader() {
	dst := r.w.Header()
	for k, v := range r.header {
		dst[k] = v
	}
	r.w.WriteHeader(r.statusCode())
}

// send delivers the buffered response.
func (r *recorder) send() {
	if r.streaming {
		return
	}
	r.sendHeader()
	r.w.Write(r.body.Bytes())
}

// response is what to store: the status, the header fields keep says to
// replay, and a copy of the body.
func (r *recorder) response(keep func(string) bool) *Response {
	resp := &Response{Status: r.statusCode(), Header: storableHeader(r.header, keep)}
	if r.streaming {
		resp.TooLarge = true
	} else {
		resp.Body = bytes.Clone(r.body.Bytes())
	}
	return resp
}

// neverStored are the fields that describe one connection, not the
// response (RFC 9110 §7.6.1), plus Date, which a replay sets anew. They
// are never stored, whatever Options.ReplayHeader says.
var neverStored = map[string]bool{
	"Connection": true, "Keep-Alive": true, "Proxy-Authenticate": true, "Proxy-Authorization": true,
	"Proxy-Connection": true, "Te": true, "Trailer": true, "Transfer-Encoding": true, "Upgrade": true, "Date": true,
}

// DefaultReplayHeader is the header policy when Options.ReplayHeader is
// nil: every field but Set-Cookie. A replay describes the result (Location,
// Content-Type, ETag, the API's own fields); it does not hand the first
// response's session to whoever sends the key again.
func DefaultReplayHeader(name string) bool { return name != "Set-Cookie" }

// storableHeader returns the fields of h to store. When all of them are,
// it is h itself, each value list clipped to its length so that an Add to
// a replayed field copies instead of writing into the stored array; the
// recorder's header is not used by anyone else once the response is
// recorded. Otherwise it is a filtered copy.
func storableHeader(h http.Header, keep func(string) bool) http.Header {
	if len(h) == 0 {
		return nil
	}
	n, all := 0, true
	for k, v := range h {
		n += len(v)
		if !stored(k, keep) {
			all = false
		}
	}
	if all {
		for k, v := range h {
			h[k] = v[:len(v):len(v)]
		}
		return h
	}
	c := make(http.Header, len(h))
	values := make([]string, 0, n) // one array for every field's values
	for k, v := range h {
		if stored(k, keep) {
			values = append(values, v...)
			c[k] = values[len(values)-len(v) : len(values) : len(values)]
		}
	}
	return c
}

// stored reports whether field k is stored and replayed. A trailer set
// after the header was written (http.TrailerPrefix+"Set-Cookie") is judged
// by its name, as the header field it becomes on the wire.
func stored(k string, keep func(string) bool) bool {
	ck := http.CanonicalHeaderKey(strings.TrimPrefix(k, http.TrailerPrefix))
	return !neverStored[ck] && keep(ck)
}

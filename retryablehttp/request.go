package retryablehttp

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
)

// ReaderFunc returns a request body, anew for each attempt; NewRequest
// takes one as a body as it is.
type ReaderFunc func() (io.Reader, error)

// ResponseHandlerFunc looks at a response CheckRetry did not retry; an
// error it returns is given to CheckRetry, which may then retry the
// request, the handler included. It must check the status itself, and the
// body is the caller's to close.
type ResponseHandlerFunc func(*http.Response) error

// LenReader is a reader that knows its length (bytes.Reader,
// strings.Reader, bytes.Buffer): NewRequest sends it with its
// Content-Length.
type LenReader interface {
	Len() int
}

// Request is an *http.Request whose body can be had again for each
// attempt. The embedded *http.Request is what is sent.
type Request struct {
	body            ReaderFunc
	responseHandler ResponseHandlerFunc

	*http.Request
}

// NewRequest returns a Request with a background context. rawBody is nil,
// a ReaderFunc or func() (io.Reader, error), a []byte, a *bytes.Buffer, a
// *bytes.Reader, an io.ReadSeeker (rewound for each attempt) or any other
// io.Reader (read into memory now).
func NewRequest(method, url string, rawBody any) (*Request, error) {
	return NewRequestWithContext(context.Background(), method, url, rawBody)
}

// NewRequestWithContext is NewRequest with a context, which bounds the
// whole call: every attempt, every wait, and the reading of the response.
func NewRequestWithContext(ctx context.Context, method, url string, rawBody any) (*Request, error) {
	hreq, err := http.NewRequestWithContext(ctx, method, url, nil)
	if err != nil {
		return nil, err
	}
	r := &Request{Request: hreq}
	if err := r.SetBody(rawBody); err != nil {
		return nil, err
	}
	return r, nil
}

// FromRequest makes r a Request, reading its body into memory unless it
// can be rewound.
func FromRequest(r *http.Request) (*Request, error) {
	var raw any
	if r.Body != nil {
		raw = r.Body
	}
	body, _, err := bodyOf(raw)
	if err != nil {
		return nil, err
	}
	return &Request{body: body, Request: r}, nil
}

// WithContext returns a shallow copy of r with its context changed to ctx.
func (r *Request) WithContext(ctx context.Context) *Request {
	return &Request{body: r.body, responseHandler: r.responseHandler, Request: r.Request.WithContext(ctx)}
}

// SetResponseHandler sets the function that looks at a response CheckRetry
// did not retry.
func (r *Request) SetResponseHandler(fn ResponseHandlerFunc) {
	r.responseHandler = fn
}

// SetBody replaces the body (of a type NewRequest takes) and its
// Content-Length.
func (r *Request) SetBody(rawBody any) error {
	body, length, err := bodyOf(rawBody)
	if err != nil {
		return err
	}
	r.body = body
	r.ContentLength = length
	if body == nil {
		r.GetBody = func() (io.ReadCloser, error) { return http.NoBody, nil }
		return nil
	}
	r.GetBody = func() (io.ReadCloser, error) { return readCloser(body()) }
	return nil
}

// BodyBytes returns a copy of the body, leaving it to be sent.
func (r *Request) BodyBytes() ([]byte, error) {
	if r.body == nil {
		return nil, nil
	}
	body, err := r.body()
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(body); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// WriteTo copies the body to w, as io.WriterTo.
func (r *Request) WriteTo(w io.Writer) (int64, error) {
	body, err := r.body()
	if err != nil {
		return 0, err
	}
	if c, ok := body.(io.Closer); ok {
		defer c.Close()
	}
	return io.Copy(w, body)
}

// bodyOf returns a function that gives raw's content anew, and its length
// when it is known (0 otherwise).
func bodyOf(raw any) (ReaderFunc, int64, error) {
	switch b := raw.(type) {
	case nil:
		return nil, 0, nil
	case ReaderFunc:
		return lengthOf(b)
	case func() (io.Reader, error):
		return lengthOf(b)
	case []byte:
		return func() (io.Reader, error) { return bytes.NewReader(b), nil }, int64(len(b)), nil
	case *bytes.Buffer:
		return func() (io.Reader, error) { return bytes.NewReader(b.Bytes()), nil }, int64(b.Len()), nil
	case *bytes.Reader:
		at := *b // the reader as it stands now, copied for each attempt
		return func() (io.Reader, error) { r := at; return &r, nil }, int64(b.Len()), nil
	case io.ReadSeeker:
		var length int64
		if lr, ok := b.(LenReader); ok {
			length = int64(lr.Len())
		}
		return func() (io.Reader, error) {
			_, err := b.Seek(0, io.SeekStart)
			return io.NopCloser(b), err
		}, length, nil
	case io.Reader:
		buf, err := io.ReadAll(b)
		if err != nil {
			return nil, 0, err
		}
		if len(buf) == 0 {
			return func() (io.Reader, error) { return http.NoBody, nil }, 0, nil
		}
		return func() (io.Reader, error) { return bytes.NewReader(buf), nil }, int64(len(buf)), nil
	}
	return nil, 0, fmt.Errorf("cannot handle type %T", raw)
}

// lengthOf calls f once to learn the length of what it gives, if its
// reader tells.
func lengthOf(f ReaderFunc) (ReaderFunc, int64, error) {
	r, err := f()
	if err != nil {
		return nil, 0, err
	}
	var length int64
	if lr, ok := r.(LenReader); ok {
		length = int64(lr.Len())
	}
	if c, ok := r.(io.Closer); ok {
		c.Close()
	}
	return f, length, nil
}

func readCloser(r io.Reader, err error) (io.ReadCloser, error) {
	if err != nil {
		return nil, err
	}
	if rc, ok := r.(io.ReadCloser); ok {
		return rc, nil
	}
	return io.NopCloser(r), nil
}

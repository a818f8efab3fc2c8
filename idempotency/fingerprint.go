package idempotency

import (
	"crypto/sha256"
	"mime"
	"net/http"
	"net/url"
	"sync"
)

// fingerprint identifies a request so that a key reused for a different
// request is caught (422) instead of replaying the wrong response:
// SHA-256 over the method, the path and the payload. The payload is, by
// default, the query string with its parameters in a canonical order, and
// the body, JSON canonicalised (see canonicalJSON) so that a client that
// re-serialises the same object still matches; Options.Fingerprint
// replaces it.
func (m *Middleware) fingerprint(r *http.Request, body []byte) ([sha256.Size]byte, error) {
	buf := fpPool.Get().(*[]byte)
	defer fpPool.Put(buf)
	b := append((*buf)[:0], r.Method...)
	b = append(b, 0)
	b = append(b, r.URL.Path...)
	b = append(b, 0)
	if m.opts.Fingerprint != nil {
		p, err := m.opts.Fingerprint(r, body)
		if err != nil {
			return [sha256.Size]byte{}, err
		}
		b = append(b, p...)
	} else {
		b = appendPayload(b, r, body)
	}
	*buf = b
	return sha256.Sum256(b), nil
}

var fpPool = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

// appendPayload appends the default payload identity: canonical query, a
// separator, canonical body.
func appendPayload(b []byte, r *http.Request, body []byte) []byte {
	if q := r.URL.RawQuery; q != "" {
		if v, err := url.ParseQuery(q); err == nil {
			q = v.Encode() // sorted by key; values of one key keep their order
		}
		b = append(b, q...)
	}
	b = append(b, 0)
	if isJSON(r.Header.Get("Content-Type")) {
		if c, ok := canonicalJSON(b, body); ok {
			return c
		}
	}
	return append(b, body...)
}

func isJSON(contentType string) bool {
	if contentType == "application/json" {
		return true
	}
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return false
	}
	return mt == "application/json" || len(mt) > 5 && mt[len(mt)-5:] == "+json"
}

package idempotency

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"mime"
)

// fingerprint identifies a request's payload so that a key reused for a
// different request is caught (422) instead of replaying the wrong
// response: SHA-256 over method, path and body. A JSON body is
// canonicalised first (keys sorted, white space dropped, numbers kept as
// written), so a client that re-serialises the same object still matches.
func fingerprint(method, path, contentType string, body []byte) string {
	h := sha256.New()
	h.Write([]byte(method))
	h.Write([]byte{0})
	h.Write([]byte(path))
	h.Write([]byte{0})
	if isJSON(contentType) {
		if c, ok := canonicalJSON(body); ok {
			body = c
		}
	}
	h.Write(body)
	return hex.EncodeToString(h.Sum(nil))
}

func isJSON(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return false
	}
	return mt == "application/json" || len(mt) > 5 && mt[len(mt)-5:] == "+json"
}

// canonicalJSON re-encodes body with sorted object keys and no
// insignificant white space. encoding/json sorts map keys; UseNumber keeps
// 1.0 and 1 distinct, as they are distinct payloads.
func canonicalJSON(body []byte) ([]byte, bool) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, false
	}
	if dec.More() {
		return nil, false // trailing data: not one JSON value
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, false
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), true
}

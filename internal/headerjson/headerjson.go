// Package headerjson writes an http.Header as the JSON object
// encoding/json writes for it, and reads one back, without reflection for
// the headers responses usually carry: the stores keep a response's
// header as JSON (readable in redis-cli and psql), and encoding/json's
// reflection was a measurable part of a replay's cost. Anything unusual
// (an escape, a byte outside printable ASCII) goes through encoding/json,
// so the results are exactly its results.
package headerjson

import (
	"encoding/json"
	"errors"
	"net/http"
	"slices"
)

// Append appends h's JSON encoding, byte for byte what json.Marshal(h)
// returns.
func Append(dst []byte, h http.Header) ([]byte, error) {
	if h == nil {
		return append(dst, "null"...), nil
	}
	keys := make([]string, 0, len(h))
	for k, v := range h {
		if !plain(k) {
			return appendMarshal(dst, h)
		}
		for _, s := range v {
			if !plain(s) {
				return appendMarshal(dst, h)
			}
		}
		keys = append(keys, k)
	}
	slices.Sort(keys)
	dst = append(dst, '{')
	for i, k := range keys {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, '"')
		dst = append(dst, k...)
		dst = append(dst, '"', ':')
		v := h[k]
		if v == nil {
			dst = append(dst, "null"...)
			continue
		}
		dst = append(dst, '[')
		for j, s := range v {
			if j > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, '"')
			dst = append(dst, s...)
			dst = append(dst, '"')
		}
		dst = append(dst, ']')
	}
	return append(dst, '}'), nil
}

func appendMarshal(dst []byte, h http.Header) ([]byte, error) {
	b, err := json.Marshal(h)
	if err != nil {
		return dst, err
	}
	return append(dst, b...), nil
}

// plain reports whether encoding/json writes s as it is: printable ASCII
// with nothing it escapes (", \, and <, > and & for HTML).
func plain(s string) bool {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c < 0x20 || c > 0x7e, c == '"', c == '\\', c == '<', c == '>', c == '&':
			return false
		}
	}
	return true
}

// Parse reads a header from JSON, as json.Unmarshal into an http.Header
// does.
func Parse(p []byte) (http.Header, error) {
	if h, ok := parsePlain(p); ok {
		return h, nil
	}
	var h http.Header
	if err := json.Unmarshal(p, &h); err != nil {
		return nil, err
	}
	return h, nil
}

var errNotPlain = errors.New("not plain")

// parsePlain reads an object of string arrays whose strings are printable
// ASCII without escapes, the usual case, with one string allocation for
// all the keys and values. It reports false for anything else.
func parsePlain(p []byte) (http.Header, bool) {
	r := reader{s: string(p)}
	r.ws()
	if r.lit("null") {
		r.ws()
		return nil, r.i == len(r.s)
	}
	if !r.byte('{') {
		return nil, false
	}
	h := http.Header{}
	r.ws()
	if r.byte('}') {
		r.ws()
		return h, r.i == len(r.s)
	}
	for {
		r.ws()
		k, err := r.str()
		if err != nil {
			return nil, false
		}
		r.ws()
		if !r.byte(':') {
			return nil, false
		}
		r.ws()
		var v []string
		switch {
		case r.lit("null"):
		case r.byte('['):
			v = []string{}
			r.ws()
			if !r.byte(']') {
				for {
					r.ws()
					s, err := r.str()
					if err != nil {
						return nil, false
					}
					v = append(v, s)
					r.ws()
					if r.byte(']') {
						break
					}
					if !r.byte(',') {
						return nil, false
					}
				}
			}
		default:
			return nil, false
		}
		h[k] = v
		r.ws()
		if r.byte('}') {
			break
		}
		if !r.byte(',') {
			return nil, false
		}
	}
	r.ws()
	return h, r.i == len(r.s)
}

type reader struct {
	s string
	i int
}

func (r *reader) ws() {
	for r.i < len(r.s) {
		switch r.s[r.i] {
		case ' ', '\t', '\n', '\r':
			r.i++
		default:
			return
		}
	}
}

func (r *reader) byte(c byte) bool {
	if r.i < len(r.s) && r.s[r.i] == c {
		r.i++
		return true
	}
	return false
}

func (r *reader) lit(l string) bool {
	if len(r.s)-r.i >= len(l) && r.s[r.i:r.i+len(l)] == l {
		r.i += len(l)
		return true
	}
	return false
}

// str reads a string with no escapes and only printable ASCII, as a
// substring of the input.
func (r *reader) str() (string, error) {
	if !r.byte('"') {
		return "", errNotPlain
	}
	start := r.i
	for r.i < len(r.s) {
		switch c := r.s[r.i]; {
		case c == '"':
			r.i++
			return r.s[start : r.i-1], nil
		case c < 0x20 || c > 0x7e || c == '\\':
			return "", errNotPlain
		}
		r.i++
	}
	return "", errNotPlain
}

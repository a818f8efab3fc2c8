package idempotency

import (
	"encoding/json"
	"net/http"
	"unicode/utf8"
)

// MarshalHeader encodes a Response's Header as the stores of this module
// keep it: a JSON object of arrays of strings, as encoding/json writes an
// http.Header. A Store of your own may keep it so too, and read it back
// with UnmarshalHeader.
func MarshalHeader(h http.Header) ([]byte, error) { return json.Marshal(h) }

// UnmarshalHeader decodes what MarshalHeader wrote. It reads the form
// MarshalHeader writes for ordinary headers (printable ASCII, no escapes)
// itself, without reflection and with one string for all the names and
// values: a replay decodes a header on every request, and encoding/json
// took a tenth of a Redis replay's time. Anything else (escapes, other
// bytes, null, other types, malformed input) is decoded by encoding/json,
// so the result is always what json.Unmarshal gives.
func UnmarshalHeader(b []byte) (http.Header, error) {
	if h, ok := parseHeader(b); ok {
		return h, nil
	}
	var h http.Header
	if err := json.Unmarshal(b, &h); err != nil {
		return nil, err
	}
	return h, nil
}

// parseHeader reads b when it is an object of arrays of plain strings,
// and reports false for anything it leaves to encoding/json.
func parseHeader(b []byte) (http.Header, bool) {
	p := headerParser{s: string(b)}
	if !p.skip('{') {
		return nil, false
	}
	h := http.Header{}
	if p.skip('}') {
		return h, p.end()
	}
	for {
		name, ok := p.str()
		if !ok || !p.skip(':') || !p.skip('[') {
			return nil, false
		}
		values := []string{}
		if !p.skip(']') {
			for {
				v, ok := p.str()
				if !ok {
					return nil, false
				}
				values = append(values, v)
				if p.skip(']') {
					break
				}
				if !p.skip(',') {
					return nil, false
				}
			}
		}
		h[name] = values // a repeated name: the last wins, as with encoding/json
		if p.skip('}') {
			return h, p.end()
		}
		if !p.skip(',') {
			return nil, false
		}
	}
}

// headerParser walks s, the input as one string that the names and values
// are slices of.
type headerParser struct {
	s string
	i int
}

func (p *headerParser) space() {
	for p.i < len(p.s) && (p.s[p.i] == ' ' || p.s[p.i] == '\t' || p.s[p.i] == '\n' || p.s[p.i] == '\r') {
		p.i++
	}
}

// skip consumes c, after white space, if it is next.
func (p *headerParser) skip(c byte) bool {
	p.space()
	if p.i < len(p.s) && p.s[p.i] == c {
		p.i++
		return true
	}
	return false
}

// str consumes a string of printable ASCII without escapes.
func (p *headerParser) str() (string, bool) {
	if !p.skip('"') {
		return "", false
	}
	start := p.i
	for ; p.i < len(p.s); p.i++ {
		switch c := p.s[p.i]; {
		case c == '"':
			v := p.s[start:p.i]
			p.i++
			return v, true
		case c == '\\', c < 0x20, c >= utf8.RuneSelf:
			return "", false
		}
	}
	return "", false
}

// end reports whether only white space is left.
func (p *headerParser) end() bool {
	p.space()
	return p.i == len(p.s)
}

package idempotency

import (
	"bytes"
	"slices"
	"sync"
	"unicode/utf8"
)

// canonicalJSON appends to dst the canonical form of the JSON value in
// body: object keys sorted, insignificant white space dropped, strings
// re-escaped as encoding/json escapes them (so "\u0041" and "A" are one
// string), numbers kept as written (1.0 and 1 are distinct payloads). It
// reports false for anything that is not exactly one JSON value, and for
// an object with a duplicate key: {"a":1,"a":2} is not the same request as
// {"a":2}, whatever a decoder would keep, so such a body is fingerprinted
// as its raw bytes.
//
// It works on the bytes directly, with no map or interface per value, and
// with pooled buffers: its cost is a copy of the body, not a decode and an
// encode.
func canonicalJSON(dst, body []byte) ([]byte, bool) {
	c := canonPool.Get().(*canonicalizer)
	defer canonPool.Put(c)
	c.in, c.pos, c.out, c.depth = body, 0, dst, 0
	c.ws()
	if !c.value() {
		return dst, false
	}
	c.ws()
	if c.pos != len(c.in) {
		return dst, false // trailing data: not one JSON value
	}
	out := c.out
	c.in, c.out = nil, nil
	return out, true
}

var canonPool = sync.Pool{New: func() any { return &canonicalizer{} }}

type canonicalizer struct {
	in    []byte
	pos   int
	out   []byte
	depth int
	tmp   []byte   // scratch for reordering an object's members
	spans [][4]int // (key start, key end, member start, member end) of the current objects, stacked
}

// maxDepth bounds nesting, as encoding/json does.
const maxDepth = 10000

func (c *canonicalizer) ws() {
	for c.pos < len(c.in) {
		switch c.in[c.pos] {
		case ' ', '\t', '\n', '\r':
			c.pos++
		default:
			return
		}
	}
}

func (c *canonicalizer) value() bool {
	if c.pos >= len(c.in) {
		return false
	}
	switch b := c.in[c.pos]; {
	case b == '{':
		return c.object()
	case b == '[':
		return c.array()
	case b == '"':
		return c.str()
	case b == 't':
		return c.literal("true")
	case b == 'f':
		return c.literal("false")
	case b == 'n':
		return c.literal("null")
	case b == '-' || b >= '0' && b <= '9':
		return c.number()
	}
	return false
}

func (c *canonicalizer) literal(lit string) bool {
	if !bytes.HasPrefix(c.in[c.pos:], []byte(lit)) {
		return false
	}
	c.out = append(c.out, lit...)
	c.pos += len(lit)
	return true
}

// number copies a number as written, after checking its grammar (RFC 8259
// §6).
func (c *canonicalizer) number() bool {
	start := c.pos
	if c.in[c.pos] == '-' {
		c.pos++
	}
	switch {
	case c.pos < len(c.in) && c.in[c.pos] == '0':
		c.pos++
	case c.digits() == 0:
		return false
	}
	if c.pos < len(c.in) && c.in[c.pos] == '.' {
		c.pos++
		if c.digits() == 0 {
			return false
		}
	}
	if c.pos < len(c.in) && (c.in[c.pos] == 'e' || c.in[c.pos] == 'E') {
		c.pos++
		if c.pos < len(c.in) && (c.in[c.pos] == '+' || c.in[c.pos] == '-') {
			c.pos++
		}
		if c.digits() == 0 {
			return false
		}
	}
	c.out = append(c.out, c.in[start:c.pos]...)
	return true
}

func (c *canonicalizer) digits() int {
	n := 0
	for c.pos < len(c.in) && c.in[c.pos] >= '0' && c.in[c.pos] <= '9' {
		c.pos++
		n++
	}
	return n
}

func (c *canonicalizer) array() bool {
	if c.depth++; c.depth > maxDepth {
		return false
	}
	defer func() { c.depth-- }()
	c.pos++ // [
	c.out = append(c.out, '[')
	c.ws()
	if c.pos < len(c.in) && c.in[c.pos] == ']' {
		c.pos++
		c.out = append(c.out, ']')
		return true
	}
	for {
		if !c.value() {
			return false
		}
		c.ws()
		if c.pos >= len(c.in) {
			return false
		}
		switch c.in[c.pos] {
		case ',':
			c.pos++
			c.out = append(c.out, ',')
			c.ws()
		case ']':
			c.pos++
			c.out = append(c.out, ']')
			return true
		default:
			return false
		}
	}
}

// object writes the members in canonical form as they come, then reorders
// them by key (byte order, as encoding/json sorts map keys) in place.
func (c *canonicalizer) object() bool {
	if c.depth++; c.depth > maxDepth {
		return false
	}
	defer func() { c.depth-- }()
	c.pos++ // {
	c.out = append(c.out, '{')
	start := len(c.out)
	base := len(c.spans)
	defer func() { c.spans = c.spans[:base] }()
	c.ws()
	if c.pos < len(c.in) && c.in[c.pos] == '}' {
		c.pos++
		c.out = append(c.out, '}')
		return true
	}
	for {
		if c.pos >= len(c.in) || c.in[c.pos] != '"' {
			return false
		}
		m := len(c.out)
		if !c.str() {
			return false
		}
		keyEnd := len(c.out)
		c.ws()
		if c.pos >= len(c.in) || c.in[c.pos] != ':' {
			return false
		}
		c.pos++
		c.out = append(c.out, ':')
		c.ws()
		if !c.value() {
			return false
		}
		c.spans = append(c.spans, [4]int{m, keyEnd, m, len(c.out)})
		c.ws()
		if c.pos >= len(c.in) {
			return false
		}
		if c.in[c.pos] == '}' {
			c.pos++
			break
		}
		if c.in[c.pos] != ',' {
			return false
		}
		c.pos++
		c.out = append(c.out, ',')
		c.ws()
	}
	members := c.spans[base:]
	key := func(s [4]int) []byte { return c.out[s[0]:s[1]] }
	cmp := func(a, b [4]int) int { return bytes.Compare(key(a), key(b)) }
	sorted := slices.IsSortedFunc(members, cmp)
	if !sorted {
		slices.SortFunc(members, cmp)
	}
	for i := 1; i < len(members); i++ {
		if bytes.Equal(key(members[i-1]), key(members[i])) {
			return false // a duplicate key
		}
	}
	if !sorted {
		c.tmp = append(c.tmp[:0], c.out[start:]...)
		c.out = c.out[:start]
		for i, s := range members {
			if i > 0 {
				c.out = append(c.out, ',')
			}
			c.out = append(c.out, c.tmp[s[2]-start:s[3]-start]...)
		}
	}
	c.out = append(c.out, '}')
	return true
}

// str decodes a string's escapes and writes it again the way encoding/json
// writes strings (without HTML escaping): ", \ and control characters
// escaped, U+2028 and U+2029 escaped, invalid UTF-8 as U+FFFD.
func (c *canonicalizer) str() bool {
	c.pos++ // "
	c.out = append(c.out, '"')
	for c.pos < len(c.in) {
		b := c.in[c.pos]
		switch {
		case b == '"':
			c.pos++
			c.out = append(c.out, '"')
			return true
		case b == '\\':
			r, ok := c.escape()
			if !ok {
				return false
			}
			c.writeRune(r)
		case b < 0x20:
			return false
		case b < utf8.RuneSelf:
			// A run of printable ASCII is written as it is: copy it whole.
			end := c.pos + 1
			for end < len(c.in) && c.in[end] >= 0x20 && c.in[end] < utf8.RuneSelf && c.in[end] != '"' && c.in[end] != '\\' {
				end++
			}
			c.out = append(c.out, c.in[c.pos:end]...)
			c.pos = end
		default:
			r, size := utf8.DecodeRune(c.in[c.pos:])
			c.pos += size
			c.writeRune(r) // RuneError for invalid UTF-8, as encoding/json
		}
	}
	return false
}

// escape reads one escape sequence; a \u surrogate pair is one rune, a
// lone surrogate U+FFFD.
func (c *canonicalizer) escape() (rune, bool) {
	if c.pos+1 >= len(c.in) {
		return 0, false
	}
	e := c.in[c.pos+1]
	c.pos += 2
	switch e {
	case '"', '\\', '/':
		return rune(e), true
	case 'b':
		return '\b', true
	case 'f':
		return '\f', true
	case 'n':
		return '\n', true
	case 'r':
		return '\r', true
	case 't':
		return '\t', true
	case 'u':
		r, ok := c.hex4()
		if !ok {
			return 0, false
		}
		if r >= 0xd800 && r < 0xdc00 { // a high surrogate: a low one may follow
			if c.pos+1 < len(c.in) && c.in[c.pos] == '\\' && c.in[c.pos+1] == 'u' {
				save := c.pos
				c.pos += 2
				if lo, ok := c.hex4(); ok && lo >= 0xdc00 && lo < 0xe000 {
					return (r-0xd800)<<10 + (lo - 0xdc00) + 0x10000, true
				}
				c.pos = save
			}
			return utf8.RuneError, true
		}
		if r >= 0xdc00 && r < 0xe000 {
			return utf8.RuneError, true
		}
		return r, true
	}
	return 0, false
}

func (c *canonicalizer) hex4() (rune, bool) {
	if c.pos+4 > len(c.in) {
		return 0, false
	}
	var r rune
	for _, h := range c.in[c.pos : c.pos+4] {
		r <<= 4
		switch {
		case h >= '0' && h <= '9':
			r |= rune(h - '0')
		case h >= 'a' && h <= 'f':
			r |= rune(h - 'a' + 10)
		case h >= 'A' && h <= 'F':
			r |= rune(h - 'A' + 10)
		default:
			return 0, false
		}
	}
	c.pos += 4
	return r, true
}

const hexDigits = "0123456789abcdef"

func (c *canonicalizer) writeRune(r rune) {
	switch {
	case r == '"' || r == '\\':
		c.out = append(c.out, '\\', byte(r))
	case r == '\b':
		c.out = append(c.out, '\\', 'b')
	case r == '\f':
		c.out = append(c.out, '\\', 'f')
	case r == '\n':
		c.out = append(c.out, '\\', 'n')
	case r == '\r':
		c.out = append(c.out, '\\', 'r')
	case r == '\t':
		c.out = append(c.out, '\\', 't')
	case r < 0x20:
		c.out = append(c.out, '\\', 'u', '0', '0', hexDigits[r>>4], hexDigits[r&0xf])
	case r == '\u2028' || r == '\u2029':
		c.out = append(c.out, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
	case r < utf8.RuneSelf:
		c.out = append(c.out, byte(r))
	default:
		c.out = utf8.AppendRune(c.out, r)
	}
}

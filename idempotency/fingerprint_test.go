package idempotency

import (
	"bytes"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fp fingerprints a request as the default middleware does.
func fp(method, target, contentType, body string) string {
	r := httptest.NewRequest(method, target, strings.NewReader(body))
	r.Header.Set("Content-Type", contentType)
	sum, err := (&Middleware{}).fingerprint(r, []byte(body))
	if err != nil {
		panic(err)
	}
	return hexSum(sum)
}

func TestFingerprint(t *testing.T) {
	j := "application/json"
	base := fp("POST", "/charges", j, `{"amount":100,"currency":"EUR","meta":{"b":1,"a":[1,2]}}`)
	assert.Equal(t, base, fp("POST", "/charges", j, "{\n  \"currency\": \"EUR\", \"meta\": {\"a\": [1, 2], \"b\": 1},\n  \"amount\": 100\n}"), "key order and white space do not count")
	assert.Equal(t, base, fp("POST", "/charges", "application/json; charset=utf-8", `{"currency":"EUR","amount":100,"meta":{"a":[1,2],"b":1}}`))
	assert.Equal(t, base, fp("POST", "/charges", j, `{"amount":100,"currency":"\u0045UR","meta":{"b":1,"a":[1,2]}}`), "escapes are decoded")
	assert.NotEqual(t, base, fp("POST", "/charges", j, `{"amount":100.0,"currency":"EUR","meta":{"b":1,"a":[1,2]}}`), "numbers as written")
	assert.NotEqual(t, base, fp("POST", "/charges", j, `{"amount":100,"currency":"EUR","meta":{"b":1,"a":[2,1]}}`), "array order counts")
	assert.NotEqual(t, base, fp("PATCH", "/charges", j, `{"amount":100,"currency":"EUR","meta":{"b":1,"a":[1,2]}}`))
	assert.NotEqual(t, base, fp("POST", "/refunds", j, `{"amount":100,"currency":"EUR","meta":{"b":1,"a":[1,2]}}`))
	assert.NotEqual(t, fp("POST", "/x", "text/plain", `{"a":1,"b":2}`), fp("POST", "/x", "text/plain", `{"b":2,"a":1}`), "only JSON is canonicalised")
	assert.Equal(t, fp("POST", "/x", j, `{bad`), fp("POST", "/x", "text/plain", `{bad`), "invalid JSON is hashed as bytes")
	assert.Equal(t, fp("POST", "/x", "application/vnd.api+json", `{"b":2,"a":1}`), fp("POST", "/x", j, `{"a":1,"b":2}`))

	// The query is part of the payload, in a canonical order.
	assert.NotEqual(t, fp("POST", "/transfers?amount=100", j, `{}`), fp("POST", "/transfers?amount=999", j, `{}`))
	assert.Equal(t, fp("POST", "/t?a=1&b=2", j, `{}`), fp("POST", "/t?b=2&a=1", j, `{}`))
	assert.NotEqual(t, fp("POST", "/t?a=1&a=2", j, `{}`), fp("POST", "/t?a=2&a=1", j, `{}`), "values of one key keep their order")
	assert.NotEqual(t, fp("POST", "/t?a=1", j, `{}`), fp("POST", "/t", j, `{}`))

	// Duplicate keys: the raw bytes are fingerprinted.
	assert.NotEqual(t, fp("POST", "/x", j, `{"a":1,"a":2}`), fp("POST", "/x", j, `{"a":2}`))
	assert.NotEqual(t, fp("POST", "/x", j, `{"a":1,"a":2}`), fp("POST", "/x", j, `{"a":2,"a":1}`))
	assert.Equal(t, fp("POST", "/x", j, `{"a":1,"a":2}`), fp("POST", "/x", j, `{"a":1,"a":2}`))
}

func TestCanonicalJSON(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{}`, `{}`},
		{` [ ] `, `[]`},
		{`{"b":1,"a":2}`, `{"a":2,"b":1}`},
		{`{"b":{"d":1,"c":[3,{"f":1,"e":2}]},"a":null}`, `{"a":null,"b":{"c":[3,{"e":2,"f":1}],"d":1}}`},
		{`"\u00e9\/\n\u0001\u2028"`, "\"\u00e9/\\n\\u0001\\u2028\""},
		{`"\ud83d\ude00"`, "\"\U0001F600\""},
		{`"\ud83d"`, "\"\uFFFD\""},
		{`[1.0,-0,1e3,2E-5]`, `[1.0,-0,1e3,2E-5]`},
		{`true`, `true`},
	} {
		got, ok := canonicalJSON(nil, []byte(tc.in))
		require.True(t, ok, tc.in)
		assert.Equal(t, tc.want, string(got), tc.in)
	}
	for _, bad := range []string{``, `{`, `{"a":1,}`, `[1,]`, `01`, `1.`, `-`, `"a`, `{"a" 1}`, `{"a":1} x`, `{"a":1,"a":1}`, `tru`, "\"\x01\""} {
		_, ok := canonicalJSON(nil, []byte(bad))
		assert.False(t, ok, "%q", bad)
	}
}

// oracle is encoding/json's canonical form: decode (numbers as written) and
// encode again, keys sorted, without HTML escaping.
func oracle(body []byte) ([]byte, bool) {
	if !json.Valid(body) { // a Decoder stops after one value: "0]" decodes
		return nil, false
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil || dec.More() {
		return nil, false
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if enc.Encode(v) != nil {
		return nil, false
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), true
}

// FuzzCanonicalJSON: the canonicaliser agrees with encoding/json on every
// body without duplicate keys, is idempotent, and never panics.
func FuzzCanonicalJSON(f *testing.F) {
	for _, s := range []string{`{"b":1,"a":[1,2,{"d":null,"c":"x"}]}`, `[1.0, 1e3, -0]`, `"\u00e9"`, `{"a":1} {"b":2}`, `{`, `{"a":1,"a":2}`, `"\ud800\udc00"`, "\"\xff\""} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		c, ok := canonicalJSON(nil, body)
		want, wantOK := oracle(body)
		if ok {
			if !wantOK {
				t.Fatalf("%q: canonicalised to %q, but encoding/json rejects it", body, c)
			}
			if !bytes.Equal(c, want) {
				t.Fatalf("%q: %q, encoding/json says %q", body, c, want)
			}
			c2, ok := canonicalJSON(nil, c)
			if !ok || !bytes.Equal(c, c2) {
				t.Fatalf("not idempotent: %q -> %q -> %q", body, c, c2)
			}
		} else if wantOK && !hasDuplicateKey(body) {
			t.Fatalf("%q: rejected, encoding/json accepts it as %q", body, want)
		}
	})
}

// hasDuplicateKey reports whether some object in a valid JSON body repeats
// a key, by decoding objects into an ordered list of keys.
func hasDuplicateKey(body []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(body))
	type frame struct {
		obj    bool
		keys   map[string]bool
		expect bool // next string token is a key
	}
	var stack []*frame
	for {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		top := (*frame)(nil)
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		switch v := tok.(type) {
		case json.Delim:
			switch v {
			case '{':
				stack = append(stack, &frame{obj: true, keys: map[string]bool{}, expect: true})
				continue
			case '[':
				stack = append(stack, &frame{})
				continue
			default:
				stack = stack[:len(stack)-1]
			}
		case string:
			if top != nil && top.obj && top.expect {
				if top.keys[v] {
					return true
				}
				top.keys[v] = true
				top.expect = false
				continue
			}
		}
		if len(stack) > 0 && stack[len(stack)-1].obj {
			stack[len(stack)-1].expect = true
		}
	}
}

func BenchmarkCanonicalJSON(b *testing.B) {
	body := []byte(`{"amount":100,"currency":"EUR","customer":"cus_123","metadata":{"order":"o-991","note":"gift \u00e9"},"items":[{"sku":"a","qty":1},{"sku":"b","qty":2}]}`)
	b.Run("ours", func(b *testing.B) {
		b.ReportAllocs()
		var buf []byte
		for b.Loop() {
			buf, _ = canonicalJSON(buf[:0], body)
		}
	})
	b.Run("encoding/json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			oracle(body)
		}
	})
}

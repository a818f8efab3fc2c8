package idempotency

import (
	"crypto/sha256"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestParseKey(t *testing.T) {
	cases := []struct {
		in, want string
		ok       bool
	}{
		{`abc`, "abc", true},
		{`"abc"`, "abc", true},
		{` "a b" `, "a b", true},
		{`"a\"b\\c"`, `a"b\c`, true},
		{`4c345627-3d78-4ef2-8d0d-daeb9da031a7`, "4c345627-3d78-4ef2-8d0d-daeb9da031a7", true},
		{strings.Repeat("k", 255), strings.Repeat("k", 255), true},
		{strings.Repeat("k", 256), "", false},
		{`"` + strings.Repeat("k", 256) + `"`, "", false},
		{``, "", false},
		{`""`, "", false},
		{`"abc`, "", false},
		{`"abc"x`, "", false},
		{`"a\x"`, "", false},
		{"\"a\x01\"", "", false},
		{`a b`, "", false},
		{`a"b`, "", false},
		{"k\xff", "", false},
	}
	for _, tc := range cases {
		got, err := ParseKey(tc.in)
		if tc.ok {
			assert.NoError(t, err, "%q", tc.in)
			assert.Equal(t, tc.want, got, "%q", tc.in)
		} else {
			assert.ErrorIs(t, err, errInvalidKey, "%q", tc.in)
		}
	}
}

// Both key headers are read; together they must name one key.
func TestRequestKey(t *testing.T) {
	for _, tc := range []struct {
		name    string
		h       http.Header
		key     string
		present bool
		err     string
	}{
		{"none", http.Header{}, "", false, ""},
		{"standard", http.Header{"Idempotency-Key": {"k1"}}, "k1", true, ""},
		{"X- form", http.Header{"X-Idempotency-Key": {"k1"}}, "k1", true, ""},
		{"both, same key (one quoted)", http.Header{"Idempotency-Key": {`"k1"`}, "X-Idempotency-Key": {"k1"}}, "k1", true, ""},
		{"both, different keys", http.Header{"Idempotency-Key": {"k1"}, "X-Idempotency-Key": {"k2"}}, "", true, "name different keys"},
		{"twice", http.Header{"Idempotency-Key": {"k1", "k1"}}, "", true, "exactly one Idempotency-Key"},
		{"X- twice", http.Header{"X-Idempotency-Key": {"k1", "k2"}}, "", true, "exactly one X-Idempotency-Key"},
		{"malformed", http.Header{"X-Idempotency-Key": {`"k1`}}, "", true, "unterminated"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key, present, err := requestKey(tc.h)
			assert.Equal(t, tc.present, present)
			if tc.err != "" {
				assert.ErrorContains(t, err, tc.err)
				return
			}
			assert.NoError(t, err)
			assert.Equal(t, tc.key, key)
		})
	}
}

// FuzzParseKey: any header value is either rejected or yields a key of 1 to
// 255 printable bytes; a valid bare token is its own key.
func FuzzParseKey(f *testing.F) {
	for _, s := range []string{`abc`, `"abc"`, `"a\"b"`, ``, `"`, `a b`, strings.Repeat("k", 256)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		k, err := ParseKey(v)
		if err != nil {
			return
		}
		if len(k) == 0 || len(k) > MaxKeyLength {
			t.Fatalf("%q: key of %d bytes", v, len(k))
		}
		for i := 0; i < len(k); i++ {
			if k[i] < 0x20 || k[i] > 0x7e {
				t.Fatalf("%q: key has byte 0x%02x", v, k[i])
			}
		}
		if trimmed := strings.Trim(v, " \t"); !strings.HasPrefix(trimmed, `"`) && k != trimmed {
			t.Fatalf("%q: bare token became %q", v, k)
		}
	})
}

// The identities cut from one string are the ones StoreKey,
// AuthorizationScope and the fingerprint give one by one, with the default
// scope and with a scope of the caller's: a stored key keeps its name.
func TestRequestIDsMatchTheirParts(t *testing.T) {
	r, _ := http.NewRequest("POST", "http://api.test/v1/charges", nil)
	r.Header.Set("Authorization", "Bearer sk_test_123")
	key := strings.Repeat("k", MaxKeyLength)
	fpSum := sha256.Sum256([]byte("POST\x00/v1/charges\x00{}"))

	auth := authorizationSum(r)
	scope, id, fp := requestIDs("", &auth, key, &fpSum)
	wantScope, _ := AuthorizationScope(r)
	assert.Equal(t, wantScope, scope)
	assert.Equal(t, StoreKey(wantScope, key), id)
	assert.Equal(t, hexSum(fpSum), fp)

	scope, id, fp = requestIDs("tenant-7", nil, "q-1", &fpSum)
	assert.Equal(t, "tenant-7", scope)
	assert.Equal(t, StoreKey("tenant-7", "q-1"), id)
	assert.Equal(t, hexSum(fpSum), fp)
	assert.NotEqual(t, StoreKey(wantScope, "q-1"), id, "the scope is in the key")
}

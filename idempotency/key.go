package idempotency

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/retryhttp/retryhttp/internal/wire"
)

// MaxKeyLength is the longest Idempotency-Key accepted, in bytes after
// decoding (Stripe's limit).
const MaxKeyLength = 255

var errInvalidKey = errors.New("invalid Idempotency-Key")

// ParseKey reads an Idempotency-Key field value: a Structured Field string
// (RFC 8941 §3.3.3, `"abc"`), as draft-ietf-httpapi-idempotency-key-header
// specifies, or a bare token of visible ASCII, as Stripe's clients send.
// `"q-1"` and `q-1` are the same key. It is the key StoreKey takes.
func ParseKey(v string) (string, error) {
	v = strings.Trim(v, " \t")
	var key string
	if strings.HasPrefix(v, `"`) {
		var b strings.Builder
		closed := false
		for i := 1; i < len(v); i++ {
			c := v[i]
			switch {
			case closed:
				return "", fmt.Errorf("%w: text after the closing quote", errInvalidKey)
			case c == '\\':
				if i+1 >= len(v) || (v[i+1] != '"' && v[i+1] != '\\') {
					return "", fmt.Errorf("%w: bad escape", errInvalidKey)
				}
				i++
				b.WriteByte(v[i])
			case c == '"':
				closed = true
			case c < 0x20 || c > 0x7e:
				return "", fmt.Errorf("%w: byte 0x%02x is not printable ASCII", errInvalidKey, c)
			default:
				b.WriteByte(c)
			}
		}
		if !closed {
			return "", fmt.Errorf("%w: unterminated string", errInvalidKey)
		}
		key = b.String()
	} else {
		for i := 0; i < len(v); i++ {
			if c := v[i]; c <= 0x20 || c > 0x7e || c == '"' {
				return "", fmt.Errorf("%w: byte 0x%02x is not allowed in a bare key", errInvalidKey, c)
			}
		}
		key = v
	}
	if key == "" {
		return "", fmt.Errorf("%w: empty", errInvalidKey)
	}
	if len(key) > MaxKeyLength {
		return "", fmt.Errorf("%w: %d bytes, at most %d", errInvalidKey, len(key), MaxKeyLength)
	}
	return key, nil
}

// AuthorizationScope is the default Options.Scope: a hash of the
// Authorization header, so that two callers with different credentials
// never share a key space. Requests without the header share one anonymous
// scope.
func AuthorizationScope(r *http.Request) (string, error) {
	return hexSum(authorizationSum(r)), nil
}

// authorizationSum is the digest AuthorizationScope writes in hex.
func authorizationSum(r *http.Request) [sha256.Size]byte {
	return sha256.Sum256([]byte(r.Header.Get("Authorization")))
}

// StoreKey is the identity under which the middleware stores the key of a
// caller with the given scope: a hex SHA-256 of both, so its length is
// fixed and neither can be read back from the store. key is the parsed key
// (see ParseKey), not the raw header value. Use it to find or delete a
// caller's record by hand; a handler gets its request's from
// KeyFromContext.
func StoreKey(scope, key string) string {
	return hexSum(storeKeySum(scope, key))
}

// storeKeySum is the digest StoreKey writes in hex, of a scope held as a
// string or as the bytes of one.
func storeKeySum[S string | []byte](scope S, key string) [sha256.Size]byte {
	var buf [hexLen + 1 + MaxKeyLength]byte // a default scope and the longest key fit
	b := append(buf[:0], scope...)
	b = append(b, 0)
	b = append(b, key...)
	return sha256.Sum256(b)
}

// hexLen is the length of a digest in hex.
const hexLen = 2 * sha256.Size

// hexSum is a digest in lower-case hex, the form every identity the
// middleware stores takes, in one allocation.
func hexSum(sum [sha256.Size]byte) string {
	var b [hexLen]byte
	hex.Encode(b[:], sum[:])
	return string(b[:])
}

// requestIDs returns a keyed request's scope, store key and fingerprint in
// hex, cut from one string: a request pays one allocation for the three.
// scope is what Options.Scope returned, or, when auth is not nil, the
// default scope of that Authorization digest; fpSum is the fingerprint's
// digest. The three share one array, so whoever keeps one (a memory
// store's record, the replay cache) keeps all three: 192 bytes.
func requestIDs(scope string, auth *[sha256.Size]byte, key string, fpSum *[sha256.Size]byte) (scopeID, storeKey, fp string) {
	var buf [3 * hexLen]byte
	b := buf[:0]
	var sum [sha256.Size]byte
	if auth != nil {
		b = hex.AppendEncode(b, auth[:])
		sum = storeKeySum(b, key)
	} else {
		sum = storeKeySum(scope, key)
	}
	b = hex.AppendEncode(b, sum[:])
	b = hex.AppendEncode(b, fpSum[:])
	s := string(b)
	if auth != nil {
		return s[:hexLen], s[hexLen : 2*hexLen], s[2*hexLen:]
	}
	return scope, s[:hexLen], s[hexLen:]
}

// requestKey reads the request's key from Idempotency-Key or
// X-Idempotency-Key, the two names the Transport and net/http honour. ok
// is false when neither is present. Both present must name the same key,
// and each at most once.
func requestKey(h http.Header) (key string, ok bool, err error) {
	for _, name := range wire.KeyHeaders {
		values := h[name]
		if len(values) == 0 {
			continue
		}
		if len(values) > 1 {
			return "", true, fmt.Errorf("%w: send exactly one %s header", errInvalidKey, name)
		}
		k, err := ParseKey(values[0])
		if err != nil {
			return "", true, err
		}
		if ok && k != key {
			return "", true, fmt.Errorf("%w: %s and %s name different keys", errInvalidKey, wire.IdempotencyKey, wire.XIdempotencyKey)
		}
		key, ok = k, true
	}
	return key, ok, nil
}

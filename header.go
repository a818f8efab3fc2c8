package retryhttp

import (
	"net/http"
	"strconv"
	"strings"
)

// This file holds the small readers of header field values that the
// retry decision, the rate-limit hints and the stacked-retry signals share.

// field returns the first value of the header field named, in canonical
// form, by name: a map lookup. Header.Get canonicalises its argument on
// every call, which the hints would pay for on every retry, for names that
// are constants.
func field(h http.Header, name string) string {
	if v := h[name]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// fieldInt reads the integer after prefix in v.
func fieldInt(v, prefix string) (int, bool) {
	i := strings.Index(v, prefix)
	if i < 0 {
		return 0, false
	}
	v = v[i+len(prefix):]
	end := 0
	for end < len(v) && v[end] >= '0' && v[end] <= '9' {
		end++
	}
	n, err := strconv.Atoi(v[:end])
	return n, err == nil
}

// trimOWS strips the optional white space (SP, HTAB) HTTP allows around a
// field value.
func trimOWS(s string) string {
	for len(s) > 0 && (s[0] == ' ' || s[0] == '\t') {
		s = s[1:]
	}
	for len(s) > 0 && (s[len(s)-1] == ' ' || s[len(s)-1] == '\t') {
		s = s[:len(s)-1]
	}
	return s
}

// isDigits reports whether s is a run of ASCII digits (empty counts).
func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

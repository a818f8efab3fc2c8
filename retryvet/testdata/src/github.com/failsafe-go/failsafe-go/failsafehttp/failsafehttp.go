// Package failsafehttp is a stub of failsafehttp's API for the tests.
package failsafehttp

import "net/http"

type Request struct{}

func NewRequest(r *http.Request, c *http.Client, policies ...any) *Request { return nil }
func (r *Request) Do() (*http.Response, error)                             { return nil, nil }

// Package retryhttp is a stub of the Transport for the tests.
package retryhttp

import "net/http"

type Transport struct{ Base http.RoundTripper }

func (t *Transport) RoundTrip(r *http.Request) (*http.Response, error) { return nil, nil }

// Package stripe is a stub of stripe-go's API for the tests.
package stripe

import "net/http"

type BackendConfig struct {
	HTTPClient        *http.Client
	MaxNetworkRetries *int64
}

func Int64(v int64) *int64 { return &v }

// Package option is a stub of openai-go's options for the tests.
package option

type RequestOption func()

func WithHTTPClient(c any) RequestOption { return nil }
func WithMaxRetries(n int) RequestOption { return nil }

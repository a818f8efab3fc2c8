// Package retryablehttp is a stub of go-retryablehttp's API for the tests.
package retryablehttp

import (
	"context"
	"net/http"
)

type Request struct{ *http.Request }

func NewRequest(method, url string, body any) (*Request, error) { return nil, nil }
func NewRequestWithContext(ctx context.Context, method, url string, body any) (*Request, error) {
	return nil, nil
}

type CheckRetry func(ctx context.Context, resp *http.Response, err error) (bool, error)

type Client struct {
	HTTPClient *http.Client
	RetryMax   int
	CheckRetry CheckRetry
}

func NewClient() *Client                                { return &Client{} }
func (c *Client) Do(r *Request) (*http.Response, error) { return nil, nil }

func (c *Client) Post(url, bodyType string, body any) (*http.Response, error) { return nil, nil }

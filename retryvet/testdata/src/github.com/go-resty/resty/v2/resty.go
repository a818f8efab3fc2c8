// Package resty is a stub of resty's API for the tests.
package resty

type Client struct{}

func New() *Client                                          { return &Client{} }
func (c *Client) SetRetryCount(n int) *Client               { return c }
func (c *Client) SetRetryAllowNonIdempotent(b bool) *Client { return c }

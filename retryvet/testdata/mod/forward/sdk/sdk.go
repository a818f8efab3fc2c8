// Package sdk is an API client whose request builder forwards its method
// into a request go-retryablehttp retries: the calls that pass POST or
// PATCH are reported, here and in the packages that import it.
package sdk

import (
	"context"
	"net/http"

	"github.com/hashicorp/go-retryablehttp"
)

type Client struct{ rc *retryablehttp.Client }

func New() *Client { return &Client{rc: retryablehttp.NewClient()} }

// NewRequest builds a request to path.
func (c *Client) NewRequest(ctx context.Context, method, path string) (*retryablehttp.Request, error) { // want NewRequest:"retries its parameter 1 as a method"
	return retryablehttp.NewRequestWithContext(ctx, method, "https://api.example.com"+path, nil)
}

// newRequest is a second hop.
func (c *Client) newRequest(method, path string) (*retryablehttp.Request, error) { // want newRequest:"retries its parameter 0 as a method"
	return c.NewRequest(context.Background(), method, path)
}

func (c *Client) Do(req *retryablehttp.Request) (*http.Response, error) { return c.rc.Do(req) }

func (c *Client) CreateCharge() {
	req, _ := c.newRequest(http.MethodPost, "/charges") // want `POST sent through newRequest`
	c.Do(req)
}

func (c *Client) ListCharges() {
	req, _ := c.newRequest(http.MethodGet, "/charges")
	c.Do(req)
}

// Package sdk is a client of the shape API generators emit: the method is
// a local variable handed to a request builder, the send a function of its
// own, and no Idempotency-Key anywhere.
package sdk

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"time"
)

type Client struct {
	hc   *http.Client
	base string
}

type User struct{ Name string }

func (c *Client) prepareRequest(ctx context.Context, path, method string, body any) (*http.Request, error) { // want prepareRequest:`builds a request of its parameter 2's method`
	b, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	return http.NewRequestWithContext(ctx, method, c.base+path, bytes.NewReader(b))
}

func (c *Client) callAPI(req *http.Request) (*http.Response, error) { return c.hc.Do(req) }

// CreateUser POSTs.
func (c *Client) CreateUser(ctx context.Context, u User) (*User, error) { // want CreateUser:`sends a POST \(CreateUser\)`
	var (
		localVarHTTPMethod = http.MethodPost
		localVarPath       = "/users"
	)
	req, err := c.prepareRequest(ctx, localVarPath, localVarHTTPMethod, u)
	if err != nil {
		return nil, err
	}
	resp, err := c.callAPI(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var out User
	return &out, json.NewDecoder(resp.Body).Decode(&out)
}

// GetUser GETs.
func (c *Client) GetUser(ctx context.Context, name string) (*User, error) {
	localVarHTTPMethod := http.MethodGet
	req, err := c.prepareRequest(ctx, "/users/"+name, localVarHTTPMethod, nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.callAPI(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var out User
	return &out, json.NewDecoder(resp.Body).Decode(&out)
}

// do sends a request of the method it is given.
func (c *Client) do(ctx context.Context, method, path string) error { // want do:`sends a request of its parameter 1's method \(do\)`
	req, err := c.prepareRequest(ctx, path, method, nil)
	if err != nil {
		return err
	}
	resp, err := c.callAPI(req)
	if err != nil {
		return err
	}
	return resp.Body.Close()
}

// Archive POSTs through do.
func (c *Client) Archive(ctx context.Context, name string) error { // want Archive:`sends a POST \(do\)`
	return c.do(ctx, http.MethodPost, "/users/"+name+"/archive")
}

// Config makes the retry function the client's callers hold.
type Config struct{ Max int }

// RequestFunc returns a function that calls fn until it succeeds, Max
// times at most, waiting between the calls.
func (c Config) RequestFunc() func(context.Context, func(context.Context) error) error { // want RequestFunc:`returns a function that retries its parameter 1`
	return func(ctx context.Context, fn func(context.Context) error) error {
		var err error
		for i := 0; i < c.Max; i++ {
			if err = fn(ctx); err == nil {
				return nil
			}
			time.Sleep(time.Duration(i) * 100 * time.Millisecond)
		}
		return err
	}
}

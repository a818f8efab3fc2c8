// Package safe_v2_gets retries, but sends no POST or PATCH through resty.
package safe_v2_gets

import "github.com/go-resty/resty/v2"

func client() *resty.Client { return resty.New().SetRetryCount(3) }

func read(c *resty.Client) { c.R().Get("https://api.example.com/charges") }

// Package safe_resty_zero sets resty v2's retry count to 0: no retries.
package safe_resty_zero

import "github.com/go-resty/resty/v2"

func client() *resty.Client { return resty.New().SetRetryCount(0) }

func charge(c *resty.Client, body []byte) { // want charge:`sends a POST \(charge\)`
	c.R().SetBody(body).Post("https://api.example.com/charges")
}

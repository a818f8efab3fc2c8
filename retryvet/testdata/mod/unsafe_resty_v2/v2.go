// Package unsafe_resty_v2 retries with resty v2, which after a transport
// error retries every method once SetRetryCount is above 0: the POST
// below is sent again, with no key.
package unsafe_resty_v2

import "github.com/go-resty/resty/v2"

func client() *resty.Client {
	return resty.New().SetRetryCount(3) // want `resty v2 retries every method`
}

func charge(c *resty.Client, body []byte) { // want charge:`sends a POST \(charge\)`
	c.R().SetBody(body).Post("https://api.example.com/charges")
}

func refund(c *resty.Client) { // want refund:`sends a PATCH \(refund\)`
	c.R().Execute("PATCH", "https://api.example.com/refunds/1")
}

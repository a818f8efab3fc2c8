// Package unsafe_resty_v1 retries with resty v1, which retries every
// method after a transport error once SetRetryCount is above 0, as v2
// does.
package unsafe_resty_v1

import resty "gopkg.in/resty.v1"

func client() *resty.Client {
	return resty.New().SetRetryCount(3) // want `resty v1 retries every method`
}

func charge(c *resty.Client, body []byte) { // want charge:`sends a POST \(charge\)`
	c.R().SetBody(body).Post("https://api.example.com/charges")
}

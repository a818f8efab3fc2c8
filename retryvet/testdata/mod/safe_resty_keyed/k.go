// Package safe_resty_keyed retries resty v2 POSTs that carry an
// Idempotency-Key: the server recognises the retry.
package safe_resty_keyed

import "github.com/go-resty/resty/v2"

func client() *resty.Client { return resty.New().SetRetryCount(3) }

func charge(c *resty.Client, key string, body []byte) {
	c.R().SetHeader("Idempotency-Key", key).SetBody(body).Post("https://api.example.com/charges")
}

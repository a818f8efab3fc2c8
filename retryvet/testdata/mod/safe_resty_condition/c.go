// Package safe_resty_condition retries with resty v2 under a condition
// that reads the method, so it can refuse POST and PATCH.
package safe_resty_condition

import (
	"net/http"

	"github.com/go-resty/resty/v2"
)

func client() *resty.Client {
	return resty.New().SetRetryCount(3).AddRetryCondition(func(r *resty.Response, err error) bool {
		return err != nil && r.Request.Method != http.MethodPost && r.Request.Method != http.MethodPatch
	})
}

func charge(c *resty.Client, body []byte) { // want charge:`sends a POST \(charge\)`
	c.R().SetBody(body).Post("https://api.example.com/charges")
}

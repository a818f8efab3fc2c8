// Package safe_retrymax_zero sends go-retryablehttp POSTs with RetryMax 0:
// no retries.
package safe_retrymax_zero

import "github.com/hashicorp/go-retryablehttp"

func client() *retryablehttp.Client {
	c := retryablehttp.NewClient()
	c.RetryMax = 0
	return c
}

func charge(c *retryablehttp.Client) {
	req, _ := retryablehttp.NewRequest("POST", "https://api.example.com/charges", nil)
	c.Do(req)
}

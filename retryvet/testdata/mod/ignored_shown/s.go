// Package ignored_shown is safe_ignored under -show-ignored.
package ignored_shown

import "github.com/hashicorp/go-retryablehttp"

func upload(c *retryablehttp.Client) {
	req, _ := retryablehttp.NewRequest("POST", "https://uploads.example.com/files/1", nil) //retryvet:ignore writes by offset // want `ignored \(writes by offset\): POST retried by go-retryablehttp`
	c.Do(req)
}

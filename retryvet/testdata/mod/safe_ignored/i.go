// Package safe_ignored marks a POST its protocol makes safe to repeat.
package safe_ignored

import "github.com/hashicorp/go-retryablehttp"

func upload(c *retryablehttp.Client, offset int) {
	//retryvet:ignore the upload API writes each chunk at its offset: a repeated chunk is a no-op
	req, _ := retryablehttp.NewRequest("POST", "https://uploads.example.com/files/1", nil)
	req.Header.Set("Upload-Offset", "0")
	c.Do(req)
}

package safe_retries

import (
	"context"
	"net/http"

	"github.com/hashicorp/go-retryablehttp"
)

// A CheckRetry of its own may exclude POSTs: the package's retryablehttp
// POSTs are not reported.
func client() *retryablehttp.Client {
	c := retryablehttp.NewClient()
	c.CheckRetry = func(ctx context.Context, resp *http.Response, err error) (bool, error) { return false, nil }
	return c
}

func retryableWithCheckRetry(c *retryablehttp.Client) {
	req, _ := retryablehttp.NewRequest("POST", "https://api.example.com/charges", nil)
	c.Do(req)
}

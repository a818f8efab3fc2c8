// Package app uses sdk from another package: the fact crosses it.
package app

import (
	"context"

	"retryvettest/forward/keyedsdk"
	"retryvettest/forward/sdk"
)

func refund(ctx context.Context, c *sdk.Client) {
	req, _ := c.NewRequest(ctx, "PATCH", "/refunds/1") // want `PATCH sent through NewRequest`
	c.Do(req)
}

func keyedCharge(c *keyedsdk.Client) {
	c.Send("POST", "/charges")
}

// Package app retries the SDK's calls: each POST the SDK sends is sent
// again on every retry, though no send is in sight here.
package app

import (
	"context"
	"time"

	"github.com/cenkalti/backoff/v5"

	"retryvettest/behind/sdk"
)

func create(ctx context.Context, c *sdk.Client, u sdk.User) (*sdk.User, error) {
	return backoff.Retry(ctx, func() (*sdk.User, error) {
		return c.CreateUser(ctx, u) // want `POST sent by CreateUser, retried by backoff.Retry without an Idempotency-Key`
	})
}

func get(ctx context.Context, c *sdk.Client, name string) (*sdk.User, error) {
	return backoff.Retry(ctx, func() (*sdk.User, error) {
		return c.GetUser(ctx, name)
	})
}

// archive retries by hand.
func archive(ctx context.Context, c *sdk.Client, name string) error { // want archive:`sends a POST \(do\)`
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		if err = c.Archive(ctx, name); err == nil { // want `POST sent by do, retried by this loop without an Idempotency-Key`
			return nil
		}
		time.Sleep(time.Second)
	}
	return err
}

// archiveAll archives each name once: another request each pass.
func archiveAll(ctx context.Context, c *sdk.Client, names []string) error { // want archiveAll:`sends a POST \(do\)`
	for _, n := range names {
		if err := c.Archive(ctx, n); err == nil {
			return nil
		}
	}
	return nil
}

// exporter holds a retry function made by the SDK's config.
type exporter struct {
	c         *sdk.Client
	requestFn func(context.Context, func(context.Context) error) error
}

func newExporter(c *sdk.Client) *exporter {
	return &exporter{c: c, requestFn: sdk.Config{Max: 3}.RequestFunc()}
}

func (e *exporter) export(ctx context.Context, u sdk.User) error {
	return e.requestFn(ctx, func(ctx context.Context) error {
		_, err := e.c.CreateUser(ctx, u) // want `POST sent by CreateUser, retried by requestFn without an Idempotency-Key`
		return err
	})
}

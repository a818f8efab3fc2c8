// Package config is a stub of aws-sdk-go-v2's config package for the tests.
package config

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/aws"
)

type LoadOptions struct{}

func LoadDefaultConfig(ctx context.Context, opts ...func(*LoadOptions) error) (aws.Config, error) {
	return aws.Config{}, nil
}
func WithHTTPClient(c any) func(*LoadOptions) error             { return nil }
func WithRetryer(f func() aws.Retryer) func(*LoadOptions) error { return nil }

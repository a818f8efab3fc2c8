// Package aws is a stub of aws-sdk-go-v2's aws package for the tests.
package aws

type Retryer interface{ MaxAttempts() int }

type NopRetryer struct{}

func (NopRetryer) MaxAttempts() int { return 1 }

type Config struct{}

// Package openai is a stub of openai-go's client for the tests.
package openai

import "github.com/openai/openai-go/option"

type Client struct{}

func NewClient(opts ...option.RequestOption) Client { return Client{} }

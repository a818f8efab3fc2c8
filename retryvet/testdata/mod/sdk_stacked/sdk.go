package sdk_stacked

import (
	"context"
	"net/http"

	"github.com/anthropics/anthropic-sdk-go/v2"
	anthropicoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/retryhttp/retryhttp"
	"github.com/stripe/stripe-go/v82"
)

var httpClient = &http.Client{Transport: &retryhttp.Transport{}}

var stripeLeft = &stripe.BackendConfig{HTTPClient: httpClient} // want `stripe-go retries over a retryhttp.Transport`

var stripeThree = &stripe.BackendConfig{HTTPClient: httpClient, MaxNetworkRetries: stripe.Int64(3)} // want `stripe-go retries over a retryhttp.Transport`

var stripeOff = &stripe.BackendConfig{HTTPClient: httpClient, MaxNetworkRetries: stripe.Int64(0)}

func awsLeft(ctx context.Context) {
	config.LoadDefaultConfig(ctx, config.WithHTTPClient(httpClient)) // want `aws-sdk-go-v2 retries over a retryhttp.Transport`
}

func awsOff(ctx context.Context) {
	config.LoadDefaultConfig(ctx, config.WithHTTPClient(httpClient), config.WithRetryer(func() aws.Retryer { return aws.NopRetryer{} }))
}

func openaiLeft() {
	openai.NewClient(option.WithHTTPClient(httpClient)) // want `the SDK retries \(2 times by default\) over a retryhttp.Transport`
}

func openaiOff() {
	openai.NewClient(option.WithHTTPClient(httpClient), option.WithMaxRetries(0))
}

func anthropicLeft() {
	anthropic.NewClient(anthropicoption.WithHTTPClient(httpClient)) // want `the SDK retries \(2 times by default\) over a retryhttp.Transport`
}

func anthropicOff() {
	anthropic.NewClient(anthropicoption.WithHTTPClient(httpClient), anthropicoption.WithMaxRetries(0))
}

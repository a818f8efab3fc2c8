// Package sdk_plain_client builds a retryhttp.Transport for its own calls,
// and hands the SDKs plain clients: their retries are the only layer.
package sdk_plain_client

import (
	"context"
	"net/http"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/retryhttp/retryhttp"
	"github.com/stripe/stripe-go/v82"
)

var ours = &http.Client{Transport: &retryhttp.Transport{}}

var plain = &http.Client{}

var stripePlain = &stripe.BackendConfig{HTTPClient: plain}

var stripeInline = &stripe.BackendConfig{HTTPClient: &http.Client{}}

var stripeOurs = &stripe.BackendConfig{HTTPClient: ours} // want `stripe-go retries over a retryhttp.Transport`

func awsPlain(ctx context.Context) {
	config.LoadDefaultConfig(ctx, config.WithHTTPClient(plain))
}

func openaiPlain() {
	openai.NewClient(option.WithHTTPClient(plain))
}

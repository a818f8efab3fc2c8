// Package sdk holds recipes that run: retryhttp under the SDKs of real APIs
// (stripe-go, aws-sdk-go-v2, go-openai, anthropic-sdk-go, go-github), each
// against a local server that behaves like the API, each an Example that
// runs as a test. The rule they share: one retry layer. Turn the SDK's own
// retries off where it has them, and let the Transport retry.
package sdk

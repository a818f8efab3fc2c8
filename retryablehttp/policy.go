package retryablehttp

import (
	"context"
	"crypto/tls"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"time"
)

// CheckRetry decides, after each attempt, whether to retry: resp and err
// are what HTTPClient.Do returned. An error it returns is what the caller
// gets in place of the attempt's own, whether the Client retries or not.
type CheckRetry func(ctx context.Context, resp *http.Response, err error) (bool, error)

// Backoff returns the wait before the retry that follows attempt
// attemptNum (0 for the first), whose response was resp (nil after an
// error).
type Backoff func(min, max time.Duration, attemptNum int, resp *http.Response) time.Duration

// ErrorHandler, if set, makes what the caller gets when the Client stops on
// a failure (the retries ran out, CheckRetry returned an error, a
// PrepareRetry failed): the last response (its body unread, the handler's
// to close), the error and the number of attempts. Without one the body is
// drained and closed, and the caller gets an error that says how many
// attempts were made.
type ErrorHandler func(resp *http.Response, err error, numTries int) (*http.Response, error)

// PrepareRetry is called with the request of each retry, after the wait
// and before it is sent: to sign it again, say. An error ends the call.
type PrepareRetry func(req *http.Request) error

// RequestLogHook is called before each attempt with the Client's logger,
// the request and the attempt's index, 0 for the first.
type RequestLogHook func(Logger, *http.Request, int)

// ResponseLogHook is called with each response, retried or not; reading
// or closing its body changes what the caller gets.
type ResponseLogHook func(Logger, *http.Response)

// The errors of net/http that no retry fixes, known by their text since
// they have no type of their own.
var (
	tooManyRedirects = regexp.MustCompile(`stopped after \d+ redirects\z`)
	badScheme        = regexp.MustCompile(`unsupported protocol scheme`)
	badHeader        = regexp.MustCompile(`invalid header`)
	untrustedCert    = regexp.MustCompile(`certificate is not trusted`)
)

// DefaultRetryPolicy retries connection errors, 429 and the 5xx statuses
// but 501 (and a status of 0), and stops once ctx is done, returning its
// error. It returns no other error.
func DefaultRetryPolicy(ctx context.Context, resp *http.Response, err error) (bool, error) {
	if ctx.Err() != nil {
		return false, ctx.Err()
	}
	retry, _ := retryable(resp, err)
	return retry, nil
}

// ErrorPropagatedRetryPolicy is DefaultRetryPolicy returning its reason as
// an error: the url.Error that stopped it, or "unexpected HTTP status" for
// a 5xx it retries.
func ErrorPropagatedRetryPolicy(ctx context.Context, resp *http.Response, err error) (bool, error) {
	if ctx.Err() != nil {
		return false, ctx.Err()
	}
	return retryable(resp, err)
}

// retryable is the rule the two policies share.
func retryable(resp *http.Response, err error) (bool, error) {
	if err != nil {
		if ue, ok := err.(*url.Error); ok {
			text := ue.Error()
			_, certErr := ue.Err.(*tls.CertificateVerificationError)
			if tooManyRedirects.MatchString(text) || badScheme.MatchString(text) || badHeader.MatchString(text) ||
				untrustedCert.MatchString(text) || certErr {
				return false, ue
			}
		}
		return true, nil
	}
	switch code := resp.StatusCode; {
	case code == http.StatusTooManyRequests:
		return true, nil
	case code == 0, code >= 500 && code != http.StatusNotImplemented:
		return true, fmt.Errorf("unexpected HTTP status %s", resp.Status)
	}
	return false, nil
}

// DefaultBackoff waits min·2^attemptNum, at most max; after a 429 or a 503
// with a Retry-After (seconds or a date), that wait instead, uncapped.
func DefaultBackoff(min, max time.Duration, attemptNum int, resp *http.Response) time.Duration {
	if wait, ok := retryAfter(resp); ok {
		return wait
	}
	f := math.Pow(2, float64(attemptNum)) * float64(min)
	wait := time.Duration(f)
	if float64(wait) != f || wait > max {
		return max
	}
	return wait
}

// LinearJitterBackoff waits (attemptNum+1) times a random duration between
// min and max: min = max = 1s waits 1s, 2s, 3s...
func LinearJitterBackoff(min, max time.Duration, attemptNum int, resp *http.Response) time.Duration {
	n := time.Duration(attemptNum + 1)
	if max <= min {
		return min * n
	}
	step := int64(rand.Float64()*float64(max-min)) + int64(min)
	return time.Duration(step) * n
}

// RateLimitLinearJitterBackoff is LinearJitterBackoff, but after a 429 or
// a 503 with a Retry-After it waits what the header says.
func RateLimitLinearJitterBackoff(min, max time.Duration, attemptNum int, resp *http.Response) time.Duration {
	if wait, ok := retryAfter(resp); ok {
		return wait
	}
	return LinearJitterBackoff(min, max, attemptNum, resp)
}

// retryAfter reads the Retry-After of a 429 or a 503: whole seconds, or an
// HTTP date (a past one is no wait).
func retryAfter(resp *http.Response) (time.Duration, bool) {
	if resp == nil || resp.StatusCode != http.StatusTooManyRequests && resp.StatusCode != http.StatusServiceUnavailable {
		return 0, false
	}
	v := resp.Header["Retry-After"]
	if len(v) == 0 || v[0] == "" {
		return 0, false
	}
	if s, err := strconv.ParseInt(v[0], 10, 64); err == nil {
		if s < 0 {
			return 0, false
		}
		return time.Duration(s) * time.Second, true
	}
	at, err := time.Parse(time.RFC1123, v[0])
	if err != nil {
		return 0, false
	}
	return max(0, time.Until(at)), true
}

// PassthroughErrorHandler returns the last response and error as they
// came, the body open.
func PassthroughErrorHandler(resp *http.Response, err error, _ int) (*http.Response, error) {
	return resp, err
}

// Package retryablehttp is github.com/hashicorp/go-retryablehttp's API
// (v0.7.x) on retryhttp.Transport: a project built on go-retryablehttp
// switches by changing its import path to
// github.com/retryhttp/retryhttp/retryablehttp, and nothing else.
//
// What stays as it was, and is tested side by side with go-retryablehttp
// v0.7.8 against the same scripted servers: the Client and its fields, the
// number of attempts (RetryMax + 1), the waits the Backoff function
// returns, CheckRetry's verdict and its error, the hooks (RequestLogHook
// before each attempt, ResponseLogHook after each response, PrepareRetry
// before each retry) called when go-retryablehttp calls them and given the
// request the caller's Request embeds, so that the headers they set or
// delete there hold for the attempts after, ErrorHandler, resp.Request
// (that same request, or a redirect's when HTTPClient followed one),
// the request body rewound for each attempt, each attempt sent through
// HTTPClient (its Timeout, Jar and CheckRedirect included), the logs, and
// the errors and texts callers match ("GET http://… giving up after 5
// attempt(s): …", a context's own error when it ends during a wait).
//
// The one deliberate change: a POST or PATCH carries an Idempotency-Key (a
// fresh UUID per call, unchanged on every attempt, unless the request has
// one), so that an API that honours keys charges once however many times
// the request is retried. go-retryablehttp retries every method; so does
// this package (retryhttp's Policy.RetryNonIdempotent is on), since its
// CheckRetry decides.
//
// What else differs, and why no test of a go-retryablehttp user is
// expected to tell:
//   - A discarded response body is drained up to 256 KiB within 100 ms
//     (go-retryablehttp reads 4 KiB), so that its connection is reused.
//   - A request that carries the Idempotency-Key of one the Client sent
//     earlier, or an SDK's retry-count header (Amz-Sdk-Request attempt=2,
//     X-Stainless-Retry-Count), is taken for a retry of a layer above and
//     sent once, so that two retry layers do not multiply.
//   - A wait the context's deadline would cut short is not started: the
//     call waits for the deadline and returns its error, as
//     go-retryablehttp's wait does, without the timer.
//   - Of what RequestLogHook and PrepareRetry change in the request, the
//     header is sent (each attempt is a copy the Transport makes, and
//     their header changes are carried onto it); a change to another field
//     (the URL, the body) is not.
//
// What the switch brings besides the import path, measured on four public
// projects' suites (go-gitlab, godo, govultr, egoscale): the go line. The
// module needs Go 1.25, as the retryhttp module does (its tests run under
// testing/synctest, which vet checks against the go line), and go mod tidy
// moves a project's go line up to it (go-retryablehttp v0.7.8 asks for
// 1.23). A project's own code may then see the newer defaults of that line:
// since Go 1.22 http.ServeMux matches escaped paths segment by segment (a
// test server whose routes expect "a%2Fb" to match "a/b" wants godebug
// httpmuxgo121=1 in go.mod), and since Go 1.24 go test's vet rejects a
// non-constant format string (go test -vet=off, or fix the call). The
// retryhttp module also requires Prometheus's client_golang, whose own
// requirements raise testify to v1.11.1, whose Eventually runs its
// condition differently from v1.8. go-retryablehttp at the same go line
// and versions fails the same tests; none of them is this package's
// behaviour.
package retryablehttp

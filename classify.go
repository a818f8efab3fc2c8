package retryhttp

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Decision is a ShouldRetry hook's verdict on one attempt's outcome.
type Decision int

const (
	// DecisionDefer leaves the decision to the built-in rules.
	DecisionDefer Decision = iota
	// DecisionRetry asks for another attempt. It is still subject to the safety
	// rules (a POST without an Idempotency-Key that may have reached the
	// server is never re-sent) and to the Policy's limits.
	DecisionRetry
	// DecisionStop returns this outcome to the caller.
	DecisionStop
)

func (d Decision) String() string {
	switch d {
	case DecisionDefer:
		return "defer"
	case DecisionRetry:
		return "retry"
	case DecisionStop:
		return "stop"
	}
	return "Decision(" + strconv.Itoa(int(d)) + ")"
}

// DefaultRetryStatuses returns the statuses retried when
// Transport.RetryStatuses is nil, as a new slice to extend:
// append(retryhttp.DefaultRetryStatuses(), 500).
func DefaultRetryStatuses() []int { return append([]int(nil), defaultRetryStatuses...) }

// defaultRetryStatuses are the ones that say "this failed, and may work if
// you try again" (RFC 9110 §15.5.9, §15.6.3-5; RFC 6585 §4), and 409, which
// counts only for a request with an Idempotency-Key: the idempotency
// middleware's answer while the first request with the key is still
// running. 500 and 501 are absent: they usually mean a bug or a missing
// feature, which a retry does not fix.
var defaultRetryStatuses = []int{
	http.StatusRequestTimeout,     // 408
	http.StatusConflict,           // 409, keyed requests only
	http.StatusTooManyRequests,    // 429
	http.StatusBadGateway,         // 502
	http.StatusServiceUnavailable, // 503
	http.StatusGatewayTimeout,     // 504
}

// rules are what a Transport's fields say of an attempt's outcome: which
// statuses are worth another attempt (RetryStatuses), what ShouldRetry
// says, and how the server asks for a wait (RetryHints). The attempt loop,
// the hedging race and the Throttle judge outcomes by them.
type rules struct {
	statuses    []int // nil: defaultRetryStatuses
	shouldRetry func(req *http.Request, resp *http.Response, err error) (Decision, error)
	hints       []RetryHint // nil: the defaults
}

// retryableStatus reports whether status is worth another attempt: it is in
// the status set, and is not a 409 to a request without a key (to which 409
// means a real conflict, which a retry does not resolve).
func (r *rules) retryableStatus(status int, hasKey bool) bool {
	if status == http.StatusConflict && !hasKey {
		return false
	}
	statuses := r.statuses
	if statuses == nil {
		if status < http.StatusBadRequest {
			return false // every default is an error status: a success is not looked up
		}
		statuses = defaultRetryStatuses
	}
	for _, s := range statuses {
		if s == status {
			return true
		}
	}
	return false
}

// serverSignal reads the retry advice some APIs send with an error: Stripe's
// Stripe-Should-Retry and the Stainless SDKs' X-Should-Retry ("true" or
// "false"). Defer when there is none.
func serverSignal(resp *http.Response) Decision {
	for _, h := range [...]string{"X-Should-Retry", "Stripe-Should-Retry"} {
		switch v := trimOWS(field(resp.Header, h)); {
		case strings.EqualFold(v, "true"):
			return DecisionRetry
		case strings.EqualFold(v, "false"):
			return DecisionStop
		}
	}
	return DecisionDefer
}

// hostFailureStatus reports whether a status says the host itself is
// failing, for the Breaker: 502, 503, 504. A 429 is backpressure from a
// working host, and a 500 an answer about this request.
func hostFailureStatus(status int) bool {
	return status == http.StatusBadGateway || status == http.StatusServiceUnavailable ||
		status == http.StatusGatewayTimeout
}

// transientError reports whether err, returned by a base RoundTripper, is a
// failure that a later attempt may not meet, and whether it proves that no
// byte of the request reached the server (a failed dial or DNS lookup), which
// makes even a POST without an Idempotency-Key safe to send again.
//
// It allows what it recognises and refuses the rest: TLS certificate errors,
// an unsupported scheme, an invalid header and any error it does not know are
// not retried. The caller's own context must be checked before calling it:
// context.DeadlineExceeded is itself a net.Error that reports a timeout.
func transientError(err error) (transient, nothingSent bool, trigger Trigger) {
	if isCertificateError(err) {
		return false, false, ""
	}
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) {
		// A name that does not exist will not exist in 200ms either.
		if dnsErr.IsTimeout {
			return true, true, TriggerTimeout
		}
		return dnsErr.IsTemporary, true, TriggerNetwork
	}
	var opErr *net.OpError
	dial := errors.As(err, &opErr) && opErr.Op == "dial"
	switch {
	case isAny(err, errConnRefused):
		return true, true, TriggerNetwork
	case dial && isAny(err, errUnreachable):
		return true, true, TriggerNetwork
	case isAny(err, errConnBroken), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return true, dial, TriggerNetwork
	}
	var streamErr h2StreamError
	if errors.As(err, &streamErr) {
		switch streamErr.Code {
		case h2RefusedStream:
			// RFC 9113 §8.7: the server did not process the stream.
			return true, true, TriggerNetwork
		case h2InternalError, h2Cancel, h2EnhanceYourCalm:
			return true, false, TriggerNetwork
		}
		return false, false, ""
	}
	if unprocessed, ok := goAway(err); ok {
		return true, unprocessed, TriggerNetwork
	}
	var netErr net.Error
	if errors.As(err, &netErr) && netErr.Timeout() {
		return true, dial, TriggerTimeout
	}
	return false, false, ""
}

// goAway reports whether err is net/http's HTTP/2 client meeting a GOAWAY
// frame, and whether the request's stream was above the frame's last
// stream ID: such a stream was not processed (RFC 9113 §6.8), the HTTP/2
// form of "nothing was sent", safe to send again whatever the method. A
// stream at or below it, cut when the server closed the connection, may
// have been processed, like a reset connection.
//
// net/http exports no type for these errors (its GoAwayError is
// unexported and has no As method, and the two others are plain errors),
// so the texts are matched: TestGoAway pins them against the real net/http,
// so a Go release that changes them fails that test rather than retries.
func goAway(err error) (unprocessed, ok bool) {
	msg := err.Error()
	switch {
	case strings.Contains(msg, "http2: Transport received GOAWAY from server ErrCode:"),
		strings.Contains(msg, "http2: Transport received Server's graceful shutdown GOAWAY"):
		return true, true
	case strings.Contains(msg, "http2: server sent GOAWAY and closed the connection"):
		return false, true
	}
	return false, false
}

// The errno families the classifier knows; on Windows they include the
// WSA codes, which are different numbers (see errno_windows.go).
var (
	errConnRefused = append([]error{syscall.ECONNREFUSED}, osConnRefused...)
	errUnreachable = append([]error{syscall.ENETUNREACH, syscall.EHOSTUNREACH}, osUnreachable...)
	errConnBroken  = append([]error{syscall.ECONNRESET, syscall.ECONNABORTED, syscall.EPIPE}, osConnBroken...)
)

func isAny(err error, targets []error) bool {
	for _, t := range targets {
		if errors.Is(err, t) {
			return true
		}
	}
	return false
}

func isCertificateError(err error) bool {
	var verifyErr *tls.CertificateVerificationError
	var unknownAuthority x509.UnknownAuthorityError
	var hostname x509.HostnameError
	var invalid x509.CertificateInvalidError
	return errors.As(err, &verifyErr) || errors.As(err, &unknownAuthority) ||
		errors.As(err, &hostname) || errors.As(err, &invalid)
}

// h2StreamError mirrors the fields of golang.org/x/net/http2.StreamError.
// net/http's bundled HTTP/2 stream error is unexported, but its As method
// fills any struct with these field names and types, which lets us read the
// RST_STREAM code without matching error strings.
type h2StreamError struct {
	StreamID uint32
	Code     uint32
	Cause    error
}

func (e h2StreamError) Error() string { return "http2 stream error" }

// HTTP/2 error codes, RFC 9113 §7.
const (
	h2InternalError   = 0x2
	h2RefusedStream   = 0x7
	h2Cancel          = 0x8
	h2EnhanceYourCalm = 0xb
)

// FromCheckRetry adapts a go-retryablehttp CheckRetry function (its
// DefaultRetryPolicy, ErrorPropagatedRetryPolicy, or one of your own) to
// Transport.ShouldRetry, keeping its verdict and its error as
// go-retryablehttp does: true retries, false stops, and an error replaces
// the attempt's outcome, so that (false, err) returns err and (true, err)
// retries with err as the last error should the retries run out. Our
// safety rules still hold over it: a request that may have reached the
// server and is not safe to send again (a POST without an Idempotency-Key)
// is not re-sent, whatever the function says, unless
// Policy.RetryNonIdempotent; the Policy, the budget and the breaker bound
// the retries.
//
// go-retryablehttp is not imported: the signature is all it takes.
func FromCheckRetry(check func(ctx context.Context, resp *http.Response, err error) (bool, error)) func(*http.Request, *http.Response, error) (Decision, error) {
	return func(req *http.Request, resp *http.Response, err error) (Decision, error) {
		retry, cerr := check(req.Context(), resp, err)
		if retry {
			return DecisionRetry, cerr
		}
		return DecisionStop, cerr
	}
}

// sendable is what decide needs to know of a request besides its outcome.
type sendable struct {
	again       bool // it may be sent again after it may have reached the server: replayable, its body too
	unsentAgain bool // its body can be sent again, for an attempt proven unsent
	keyed       bool // it carries an Idempotency-Key: a 409 means "in flight"
}

// plainSuccess reports whether an attempt's outcome ends the RoundTrip with no
// judging: a response below 400 when neither ShouldRetry nor
// RetryStatuses is set (every default status is 400 or above), where
// decide would stop with ReasonNotRetryable. It is small enough to be
// inlined into the loop, and most attempts end there: decide's call costs
// them about 80 instructions more (callgrind, BenchmarkSuccessInMemory).
func (r *rules) plainSuccess(resp *http.Response, err error) bool {
	return err == nil && resp != nil && resp.StatusCode < http.StatusBadRequest && r.shouldRetry == nil && r.statuses == nil
}

// decide classifies one attempt's outcome. retry is true when another
// attempt is both useful and safe; otherwise stop names the reason.
// replaced is ShouldRetry's error, which takes the place of the outcome
// from then on (the response, if any, is the caller's to close); the
// decision itself reads the outcome as it came, its status included.
func (r *rules) decide(req *http.Request, resp *http.Response, err error, s sendable) (retry bool, stop Reason, trigger Trigger, replaced error) {
	safe, bodyOK, hasKey := s.again, s.unsentAgain, s.keyed
	var d Decision
	if r.shouldRetry != nil {
		d, replaced = r.shouldRetry(req, resp, err)
	}
	if err != nil && req.Context().Err() != nil {
		return false, ReasonCanceled, "", replaced
	}
	if resp != nil {
		if d == DecisionDefer && resp.StatusCode >= 400 {
			d = serverSignal(resp)
		}
		if d == DecisionStop || (d == DecisionDefer && !r.retryableStatus(resp.StatusCode, hasKey)) || !safe {
			return false, ReasonNotRetryable, "", replaced
		}
		if spent(resp, nil) {
			return false, ReasonNotRetryable, statusTrigger(resp.StatusCode), replaced
		}
		return true, ReasonNone, statusTrigger(resp.StatusCode), replaced
	}
	transient, nothingSent, trigger := transientError(err)
	if errors.Is(err, ErrAttemptTimeout) {
		transient, trigger = true, TriggerTimeout
	}
	if d == DecisionStop || (d == DecisionDefer && !transient) || !(safe || (nothingSent && bodyOK)) || spent(nil, err) {
		return false, ReasonNotRetryable, trigger, replaced
	}
	return true, ReasonNone, trigger, replaced
}

// accepted reports whether a response shows the host took the attempt: not
// a 5xx, not a 429, not another 4xx with a wait the Transport honours.
func (r *rules) accepted(resp *http.Response, now time.Time) bool {
	switch code := resp.StatusCode; {
	case code >= 500, code == http.StatusTooManyRequests:
		return false
	case code >= 400:
		_, asked := ServerWait(resp, now, r.hints)
		return !asked
	}
	return true
}

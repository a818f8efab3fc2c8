package retryhttptest

import (
	"fmt"
	"net/http"
	"time"
)

// Step is what the server does with one request on a route. Make Steps with
// the constructors below; the zero Step is rejected by NewServer.
type Step struct {
	kind   kind
	status int
	header http.Header
	body   string
	cut    int           // PartialBody: bytes of body sent before the cut
	delay  time.Duration // before anything else
}

type kind int

const (
	kindUnset   kind = iota
	kindRespond      // answer with status, header, body
	kindForward      // run the server's Handler
	kindReset        // read the request, then reset the connection
	kindDrop         // run the Handler, then reset the connection: work done, no answer
	kindPartial      // headers and part of the body, then cut
	kindHangup       // read the request, then close the connection without answering
)

// Status answers with code and its status text as the body.
func Status(code int) Step {
	return Step{kind: kindRespond, status: code, body: http.StatusText(code)}
}

// Respond answers with code, header and body.
func Respond(code int, header http.Header, body string) Step {
	return Step{kind: kindRespond, status: code, header: header.Clone(), body: body}
}

// RetryAfter answers with code and a Retry-After header, in delta-seconds
// ("5") or an HTTP-date (http.TimeFormat) as given.
func RetryAfter(code int, value string) Step {
	s := Status(code)
	s.header = http.Header{"Retry-After": {value}}
	return s
}

// Forward runs the server's Handler: the real endpoint, a side effect.
func Forward() Step { return Step{kind: kindForward} }

// Reset reads the whole request and then resets the connection (TCP RST on
// HTTP/1.1, RST_STREAM on HTTP/2) without answering. The handler does not
// run: a failure before the work.
func Reset() Step { return Step{kind: kindReset} }

// Hangup reads the whole request and closes the connection without
// answering: a FIN on HTTP/1.1, where Reset sends an RST; an RST_STREAM on
// HTTP/2. It is what a server that closes an idle keep-alive connection
// just as a request arrives looks like, and on a reused HTTP/1.1
// connection net/http answers it by resending a replayable request itself,
// inside one RoundTrip. The handler does not run.
func Hangup() Step { return Step{kind: kindHangup} }

// DropResponse runs the Handler, throws its response away and resets the
// connection: the server did the work, the client never heard. This is the
// case that double-charges a naive retry.
func DropResponse() Step { return Step{kind: kindDrop} }

// PartialBody answers with code and a Content-Length for all of body, sends
// only its first n bytes, then cuts the connection.
func PartialBody(code int, body string, n int) Step {
	return Step{kind: kindPartial, status: code, body: body, cut: n}
}

// After returns s delayed by d before anything is written, for example to
// trip a client's per-attempt timeout. The delay ends early if the client
// goes away.
func (s Step) After(d time.Duration) Step {
	s.delay = d
	return s
}

func (s Step) String() string {
	var v string
	switch s.kind {
	case kindRespond:
		v = fmt.Sprint(s.status)
		if ra := s.header.Get("Retry-After"); ra != "" {
			v += " Retry-After: " + ra
		}
	case kindForward:
		v = "forward"
	case kindReset:
		v = "reset"
	case kindHangup:
		v = "hangup"
	case kindDrop:
		v = "drop response"
	case kindPartial:
		v = fmt.Sprintf("%d partial %d/%d", s.status, s.cut, len(s.body))
	default:
		v = "unknown step"
	}
	if s.delay > 0 {
		v += " after " + s.delay.String()
	}
	return v
}

func (s Step) validate() error {
	switch {
	case s.kind == kindUnset:
		return fmt.Errorf("unknown step (make steps with Status, Respond, RetryAfter, Forward, Reset, Hangup, DropResponse or PartialBody)")
	case s.delay < 0:
		return fmt.Errorf("%v: negative delay %v", s, s.delay)
	case (s.kind == kindRespond || s.kind == kindPartial) && (s.status < 100 || s.status > 599):
		return fmt.Errorf("%v: status %d is not in 100-599", s, s.status)
	case s.kind == kindPartial && (s.cut < 0 || s.cut >= len(s.body)):
		return fmt.Errorf("%v: cut at %d must be within the %d-byte body", s, s.cut, len(s.body))
	}
	return nil
}

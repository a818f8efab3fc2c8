// Package natsoutbox delivers outbox messages to NATS JetStream: an
// [outbox.Sender] that publishes each message to a subject with the
// message's ID as its Nats-Msg-Id and waits for the stream's
// acknowledgement, so that the message is recorded as delivered only once
// a stream holds it.
//
//	sender, err := natsoutbox.New(js)
//	relay, err := outbox.NewRelay(outbox.RelayOptions{Outbox: box,
//		Senders: map[string]outbox.Sender{natsoutbox.Scheme: sender}})
//	box.Enqueue(ctx, tx, outbox.Message{URL: natsoutbox.URL("orders.placed"), Body: event})
//
// Exactly once. The relay publishes at least once: a relay that dies after
// the publish and before recording it publishes the message again when its
// lease expires. Within the stream's duplicate window (Duplicates, two
// minutes by default) JetStream drops that second copy by its Nats-Msg-Id
// and acknowledges it as a duplicate, which the relay records as
// delivered. A message published again after the window (a relay that
// recorded nothing for longer, the database down meanwhile) is stored
// twice; a consumer that runs each message once per key, as
// queue/natsjs does with the Nats-Msg-Id as its default key, runs the
// second copy as a duplicate. So keep the Runner's Retention longer than
// the relay's longest redelivery (its Lease, plus any outage of the
// database), and the stream's window for what it can catch cheaply.
package natsoutbox

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/retryhttp/retryhttp/outbox"
)

// Scheme is the URL scheme a relay's Senders map this Sender under.
const Scheme = "nats"

// URL is the outbox URL of a message for subject: "nats:" + subject.
func URL(subject string) string { return Scheme + ":" + subject }

// Sender publishes outbox messages to JetStream. It is safe for
// concurrent use.
type Sender struct {
	js jetstream.JetStream
}

// New returns a Sender publishing through js.
func New(js jetstream.JetStream) (*Sender, error) {
	if js == nil {
		return nil, errors.New("natsoutbox: nil JetStream")
	}
	return &Sender{js: js}, nil
}

// Send implements outbox.Sender: it publishes d to the subject its URL
// names, with d's header and d.ID as Nats-Msg-Id, and waits for the
// stream's acknowledgement. A subject no stream takes is a failure,
// retried (a stream may be created meanwhile); a URL without a valid
// subject is refused for good.
func (s *Sender) Send(ctx context.Context, d outbox.Delivery) outbox.Result {
	subject := d.URL.Opaque
	if !validSubject(subject) {
		return outbox.Result{Err: fmt.Errorf("natsoutbox: %q names no subject (want %s)", d.URL.String(), URL("subject.tokens")), Final: true}
	}
	msg := nats.NewMsg(subject)
	msg.Data = d.Body
	for k, v := range d.Header {
		msg.Header[k] = v
	}
	msg.Header.Set(jetstream.MsgIDHeader, d.ID)
	if _, err := s.js.PublishMsg(ctx, msg); err != nil {
		switch nc := s.js.Conn(); {
		case !nc.IsConnected():
			// Disconnected, nats.go answers a message with a header as if
			// the server could not take headers: say what is wrong.
			err = fmt.Errorf("natsoutbox: the NATS server is unreachable (connection %s): publish to %q: %w", nc.Status(), subject, err)
		case errors.Is(err, jetstream.ErrNoStreamResponse) || errors.Is(err, nats.ErrNoResponders):
			err = fmt.Errorf("natsoutbox: no stream takes subject %q: %w", subject, err)
		default:
			err = fmt.Errorf("natsoutbox: publish to %q: %w", subject, err)
		}
		return outbox.Result{Err: err}
	}
	return outbox.Result{}
}

// validSubject reports whether s is a subject a message can be published
// to: dot-separated tokens, none empty, no wildcard, no white space.
func validSubject(s string) bool {
	if s == "" || strings.ContainsAny(s, " \t\r\n*>") {
		return false
	}
	for tok := range strings.SplitSeq(s, ".") {
		if tok == "" {
			return false
		}
	}
	return true
}

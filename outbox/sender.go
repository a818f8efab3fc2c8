package outbox

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/retryhttp/retryhttp"
)

// A Sender delivers messages to one kind of destination, named by the
// scheme of a message's URL: the relay has one for http and https (its
// Client), and RelayOptions.Senders adds others, such as the NATS
// JetStream and RabbitMQ senders of modules outbox/natsoutbox and
// outbox/rabbitoutbox.
//
// A delivery is at least once: a relay that dies after Send returned, and
// before it recorded the outcome, sends the message again when its lease
// expires, with the same ID. So a Sender passes the ID on as the
// destination's deduplication key (Idempotency-Key, Nats-Msg-Id, an AMQP
// message-id), and the destination or its consumer recognises the second
// copy.
type Sender interface {
	// Send delivers d and reports how it went. It must return by the
	// time ctx is done; the relay's Lease bounds it.
	Send(ctx context.Context, d Delivery) Result
}

// Delivery is one message being sent.
type Delivery struct {
	// ID is the message's ID: its deduplication key at the destination.
	ID string
	// Method, URL and Body are the message as enqueued (Method defaulted
	// to POST).
	Method string
	URL    *url.URL
	Body   []byte
	// Header is the message's header as Message.Header says it is sent:
	// names in canonical form, and always an Idempotency-Key, the
	// destination's and its consumer's deduplication key. A Sender passes
	// it on as it is.
	Header http.Header
	// Deliveries counts the attempts, this one included: above 1, the
	// message may have arrived before.
	Deliveries int
}

// Result is what a Send reports.
type Result struct {
	// Err is nil when the destination accepted the message: it is then
	// recorded as delivered, for good. Otherwise the message is tried again
	// after the relay's Backoff, or is dead once Final or after
	// MaxDeliveries deliveries.
	Err error
	// Final says that no later delivery can succeed (the destination
	// refused the message for good): the message is dead at once.
	Final bool
	// Status is the destination's status code, where it has one (HTTP's);
	// it is recorded as the message's LastStatus.
	Status int
	// Wait is how long the destination asked to be left alone (a
	// Retry-After): the next delivery waits at least that, up to the
	// relay's MaxRetryAfter.
	Wait time.Duration
}

// SenderFunc is a function that is a Sender.
type SenderFunc func(ctx context.Context, d Delivery) Result

// Send implements Sender.
func (f SenderFunc) Send(ctx context.Context, d Delivery) Result { return f(ctx, d) }

// deliveryHeader is the header message id is delivered with, for every
// Sender alike: h's names in canonical form (HTTP's header names are
// case-insensitive, a broker's are not, and consumers look up the
// canonical Idempotency-Key), and an Idempotency-Key: h's own, else the
// value of its X-Idempotency-Key, else id. h is not modified.
func deliveryHeader(h http.Header, id string) http.Header {
	out := make(http.Header, len(h)+1)
	for k, vs := range h {
		ck := http.CanonicalHeaderKey(k)
		out[ck] = append(out[ck], vs...)
	}
	if out.Get(retryhttp.HeaderIdempotencyKey) == "" {
		key := out.Get(retryhttp.HeaderXIdempotencyKey)
		if key == "" {
			key = id
		}
		out.Set(retryhttp.HeaderIdempotencyKey, key)
	}
	return out
}

// errNoSender is the error of a message whose scheme has no Sender in
// this relay: retried, since a relay that has one (a newer version,
// mid-deploy) may come.
func errNoSender(scheme string) error {
	return fmt.Errorf("no Sender for scheme %q in this relay (RelayOptions.Senders)", scheme)
}

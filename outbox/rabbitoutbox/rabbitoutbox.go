// Package rabbitoutbox delivers outbox messages to RabbitMQ: an
// [outbox.Sender] that publishes each message with the message's ID as its
// AMQP message-id, persistent, mandatory, on a channel in confirm mode,
// and waits for the broker's confirmation, so that a message is recorded
// as delivered only once the broker has taken it, and one no queue takes
// is not dropped in silence.
//
//	sender, err := rabbitoutbox.New(rabbitoutbox.Options{Dial: func() (*amqp.Connection, error) {
//		return amqp.Dial("amqp://guest:guest@rabbitmq:5672/")
//	}})
//	defer sender.Close()
//	relay, err := outbox.NewRelay(outbox.RelayOptions{Outbox: box,
//		Senders: map[string]outbox.Sender{rabbitoutbox.Scheme: sender}})
//	box.Enqueue(ctx, tx, outbox.Message{URL: rabbitoutbox.URL("orders", "placed"), Body: event})
//
// A message no queue is bound to take (the broker returns a mandatory
// message) is a failed delivery: tried again after the relay's backoff,
// and dead after its MaxDeliveries, with the broker's reason. So is a
// missing exchange (the broker closes the channel; the Sender opens
// another) and a lost connection (the Sender dials again).
//
// Exactly once. RabbitMQ does not deduplicate: the relay publishes at
// least once (a relay that dies after the broker confirmed and before it
// recorded the delivery publishes the message again after its lease), and
// the queue may then hold two copies with one message-id. A consumer that
// runs each message once per key, as queue/rabbitmq does with the
// message-id as its default key, runs the second copy as a duplicate.
package rabbitoutbox

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/retryhttp/retryhttp/outbox"
)

// Scheme is the URL scheme a relay's Senders map this Sender under.
const Scheme = "amqp"

// URL is the outbox URL of a message for exchange and routing key:
// "amqp:" + exchange + "/" + key, each path-escaped. The exchange "" is
// the default exchange, which routes to the queue the key names.
func URL(exchange, key string) string {
	return Scheme + ":" + url.PathEscape(exchange) + "/" + url.PathEscape(key)
}

// Options configure New.
type Options struct {
	// Dial opens a connection to the broker: at the first Send, and again
	// when the connection has closed. Required.
	Dial func() (*amqp.Connection, error)
}

// Sender publishes outbox messages to RabbitMQ. It is safe for
// concurrent use: each Send in flight has a channel of its own (in
// confirm mode, kept for the next Send), so that a return and a
// confirmation belong to that Send alone.
type Sender struct {
	dial func() (*amqp.Connection, error)

	mu     sync.Mutex
	conn   *amqp.Connection
	idle   []*channel
	closed bool
}

// channel is a confirm-mode channel and what the broker tells it.
type channel struct {
	ch      *amqp.Channel
	returns chan amqp.Return // a mandatory message that no queue took
	closes  chan *amqp.Error // why the broker closed the channel
}

// New returns a Sender. It connects at the first Send.
func New(o Options) (*Sender, error) {
	if o.Dial == nil {
		return nil, errors.New("rabbitoutbox: nil Dial")
	}
	return &Sender{dial: o.Dial}, nil
}

// Close closes the Sender's connection; a Send after Close fails.
func (s *Sender) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	s.idle = nil
	if s.conn == nil {
		return nil
	}
	return s.conn.Close()
}

// Send implements outbox.Sender: it publishes d to the exchange and
// routing key its URL names and waits for the broker's confirmation.
func (s *Sender) Send(ctx context.Context, d outbox.Delivery) outbox.Result {
	exchange, key, err := parse(d.URL)
	if err != nil {
		return outbox.Result{Err: err, Final: true}
	}
	c, err := s.channel()
	if err != nil {
		return outbox.Result{Err: fmt.Errorf("rabbitoutbox: %w", err)}
	}
	p := amqp.Publishing{MessageId: d.ID, DeliveryMode: amqp.Persistent, Body: d.Body, Headers: amqp.Table{}}
	for k, v := range d.Header {
		switch {
		case len(v) == 0:
		case k == "Content-Type":
			p.ContentType = v[0]
		default:
			p.Headers[k] = strings.Join(v, ", ")
		}
	}
	dc, err := c.ch.PublishWithDeferredConfirmWithContext(ctx, exchange, key, true, false, p)
	if err != nil {
		err = c.reason(err)
		c.ch.Close() // closed already, or in a state not worth keeping: the next Send opens another
		return outbox.Result{Err: fmt.Errorf("rabbitoutbox: publish to %s: %w", where(exchange, key), err)}
	}
	acked, err := dc.WaitContext(ctx)
	if err != nil {
		// The confirmation may still come, to a channel nobody reads: let
		// the channel go with it.
		c.ch.Close()
		return outbox.Result{Err: fmt.Errorf("rabbitoutbox: no confirmation from the broker for %s: %w", where(exchange, key), err)}
	}
	// A return comes before the confirmation of its message, on the same
	// connection, and is handed to c.returns before the confirmation is
	// processed: if there is one, it is there now.
	select {
	case r, ok := <-c.returns:
		if ok { // else the channel closed: below
			s.put(c)
			return outbox.Result{Err: fmt.Errorf("rabbitoutbox: no queue takes %s: the broker returned it (%d %s)", where(exchange, key), r.ReplyCode, r.ReplyText)}
		}
	default:
	}
	if !acked {
		if c.ch.IsClosed() {
			return outbox.Result{Err: fmt.Errorf("rabbitoutbox: publish to %s: %w", where(exchange, key), c.reason(amqp.ErrClosed))}
		}
		s.put(c)
		return outbox.Result{Err: fmt.Errorf("rabbitoutbox: the broker refused %s (nack)", where(exchange, key))}
	}
	s.put(c)
	return outbox.Result{}
}

func where(exchange, key string) string {
	if exchange == "" {
		return fmt.Sprintf("the default exchange with routing key %q", key)
	}
	return fmt.Sprintf("exchange %q with routing key %q", exchange, key)
}

// parse reads the exchange and routing key of a URL made by URL.
func parse(u *url.URL) (exchange, key string, err error) {
	raw := u.Opaque // "exchange/key"
	if raw == "" {
		raw = u.EscapedPath() // "/key": the default exchange
	}
	e, k, ok := strings.Cut(raw, "/")
	ok = ok && u.Host == "" && u.User == nil // amqp://host/... names a broker, not a destination
	if ok {
		exchange, err = url.PathUnescape(e)
		if err == nil {
			key, err = url.PathUnescape(k)
		}
	}
	if !ok || err != nil {
		return "", "", fmt.Errorf("rabbitoutbox: %q names no exchange and routing key (want %s)", u.String(), URL("exchange", "key"))
	}
	return exchange, key, nil
}

// reason is why c failed: the broker's own words when it closed the
// channel (a missing exchange: 404 NOT_FOUND), else err.
func (c *channel) reason(err error) error {
	select {
	case e, ok := <-c.closes:
		if ok && e != nil {
			return e
		}
	default:
	}
	return err
}

// channel returns an idle channel, or opens one, dialling the broker if
// the connection is gone.
func (s *Sender) channel() (*channel, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, errors.New("the Sender is closed")
	}
	for len(s.idle) > 0 {
		c := s.idle[len(s.idle)-1]
		s.idle = s.idle[:len(s.idle)-1]
		if !c.ch.IsClosed() {
			return c, nil
		}
	}
	if s.conn == nil || s.conn.IsClosed() {
		conn, err := s.dial()
		if err != nil {
			return nil, fmt.Errorf("dial: %w", err)
		}
		s.conn = conn
	}
	ch, err := s.conn.Channel()
	if err != nil {
		return nil, err
	}
	if err := ch.Confirm(false); err != nil {
		ch.Close()
		return nil, err
	}
	return &channel{ch: ch,
		returns: ch.NotifyReturn(make(chan amqp.Return, 1)),
		closes:  ch.NotifyClose(make(chan *amqp.Error, 1)),
	}, nil
}

// put keeps c for the next Send, unless it is closed.
func (s *Sender) put(c *channel) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || c.ch.IsClosed() {
		c.ch.Close()
		return
	}
	s.idle = append(s.idle, c)
}

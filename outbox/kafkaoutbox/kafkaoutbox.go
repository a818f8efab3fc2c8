// Package kafkaoutbox delivers outbox messages to Kafka: an
// [outbox.Sender] that produces each message as a record, with the
// message's ID in the MessageIDHeader header and the business key its URL
// names as the record's key, through franz-go's idempotent producer with
// acknowledgements from every in-sync replica, and waits for the broker's
// acknowledgement, so that a message is recorded as delivered only once
// the topic holds it.
//
//	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
//	sender, err := kafkaoutbox.New(cl)
//	relay, err := outbox.NewRelay(outbox.RelayOptions{Outbox: box,
//		Senders: map[string]outbox.Sender{kafkaoutbox.Scheme: sender}})
//	box.Enqueue(ctx, tx, outbox.Message{URL: kafkaoutbox.URL("orders", orderID), Body: event,
//		Header: http.Header{"Idempotency-Key": {orderID}}})
//
// Order. Records with one key go to one partition (franz-go's default
// partitioner hashes the key as Kafka's Java client does), so the events
// of one order are read in the order the relay produced them. The relay
// itself may reorder the messages of a key it retries; a consumer that
// needs a strict order checks a version in the event.
//
// Exactly once. The idempotent producer drops the duplicates its own
// retries would write (one producer session, numbered batches), not a
// message the relay produces again: a relay that dies after the
// broker acknowledged and before it recorded the delivery produces the
// message again after its lease, from another session, and the topic then
// holds two records with one message ID and one key. A consumer that runs
// each record once per business key, as queue/kafka does with the
// Idempotency-Key header as its default key, runs the second as a
// duplicate.
//
// A transactional producer would not remove that duplicate either: a
// Kafka transaction makes writes to several partitions (and a consumer's
// offsets) visible together, but it cannot span the outbox's database and
// the broker, which is what the relay's crash sits between. A message is
// one record, so there is nothing for a transaction to make atomic; this
// Sender does not use one, and read_committed consumers read its records
// as any others.
package kafkaoutbox

import (
	"context"
	"errors"
	"fmt"
	"net/url"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/retryhttp/retryhttp/outbox"
)

// Scheme is the URL scheme a relay's Senders map this Sender under.
const Scheme = "kafka"

// MessageIDHeader is the record header that carries the outbox message's
// ID.
const MessageIDHeader = "Outbox-Message-Id"

// KeyHeader is the header whose value is the record's key when the URL
// names none: the Idempotency-Key every outbox message is delivered with
// (the message's own, or else its ID; see outbox.Message.Header), sent
// as the record header of that name that queue/kafka's consumers key by.
const KeyHeader = "Idempotency-Key"

// URL is the outbox URL of a message for topic, with key as the record's
// key: "kafka:" + topic, and "?key=" + key (query-escaped) when key is
// not "".
func URL(topic, key string) string {
	if key == "" {
		return Scheme + ":" + topic
	}
	return Scheme + ":" + topic + "?key=" + url.QueryEscape(key)
}

// Sender produces outbox messages to Kafka. It is safe for concurrent
// use.
type Sender struct {
	cl *kgo.Client
}

// New returns a Sender producing through cl, which must keep franz-go's
// idempotent producer (no kgo.DisableIdempotentWrite). franz-go's
// idempotent producer waits for every in-sync replica
// (kgo.AllISRAcks): with fewer acknowledgements a record the broker
// acknowledged can be lost with its leader, after the relay recorded it
// as delivered.
func New(cl *kgo.Client) (*Sender, error) {
	if cl == nil {
		return nil, errors.New("kafkaoutbox: nil client")
	}
	if off, _ := cl.OptValue(kgo.DisableIdempotentWrite).(bool); off {
		return nil, errors.New("kafkaoutbox: the client's producer is not idempotent (kgo.DisableIdempotentWrite): its retries could write a message twice")
	}
	return &Sender{cl: cl}, nil
}

// Send implements outbox.Sender: it produces d to the topic its URL
// names, keyed by the URL's key (or d's KeyHeader), with d's header and
// d.ID as MessageIDHeader, and waits for the broker's acknowledgement. A
// topic that does not exist is a failure, retried (it may be created
// meanwhile); a URL without a valid topic, and a record the broker
// refuses for good (too large, an invalid topic), are refused for good.
func (s *Sender) Send(ctx context.Context, d outbox.Delivery) outbox.Result {
	topic, key, err := parse(d.URL)
	if err != nil {
		return outbox.Result{Err: err, Final: true}
	}
	if key == "" {
		key = d.Header.Get(KeyHeader)
	}
	r := &kgo.Record{Topic: topic, Value: d.Body}
	if key != "" {
		r.Key = []byte(key)
	}
	for k, vs := range d.Header {
		for _, v := range vs {
			r.Headers = append(r.Headers, kgo.RecordHeader{Key: k, Value: []byte(v)})
		}
	}
	r.Headers = append(r.Headers, kgo.RecordHeader{Key: MessageIDHeader, Value: []byte(d.ID)})
	if err := s.cl.ProduceSync(ctx, r).FirstErr(); err != nil {
		final := errors.Is(err, kerr.MessageTooLarge) || errors.Is(err, kerr.RecordListTooLarge) ||
			errors.Is(err, kerr.InvalidTopicException) || errors.Is(err, kerr.TopicAuthorizationFailed)
		return outbox.Result{Err: fmt.Errorf("kafkaoutbox: produce to %q: %w", topic, err), Final: final}
	}
	return outbox.Result{}
}

// parse reads the topic and key of a URL made by URL.
func parse(u *url.URL) (topic, key string, err error) {
	topic = u.Opaque
	if !validTopic(topic) || u.Host != "" || u.User != nil {
		return "", "", fmt.Errorf("kafkaoutbox: %q names no topic (want %s)", u.String(), URL("topic", "key"))
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return "", "", fmt.Errorf("kafkaoutbox: %q: %w", u.String(), err)
	}
	return topic, q.Get("key"), nil
}

// validTopic reports whether s is a topic name Kafka takes: 1 to 249 of
// ASCII letters, digits, '.', '_' and '-', and not "." or "..".
func validTopic(s string) bool {
	if s == "" || len(s) > 249 || s == "." || s == ".." {
		return false
	}
	for _, c := range s {
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '.', c == '_', c == '-':
		default:
			return false
		}
	}
	return true
}

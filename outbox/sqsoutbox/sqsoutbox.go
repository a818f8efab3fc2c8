// Package sqsoutbox delivers outbox messages to Amazon SQS: an
// [outbox.Sender] that sends each message to a queue with the message's
// ID in the MessageIDAttribute attribute and its header as message
// attributes, and on a FIFO queue the message's ID as its
// MessageDeduplicationId and the business key its URL names as its
// MessageGroupId (one group per key: a key's messages in order), and
// reports success once SQS has taken it.
//
//	sender, err := sqsoutbox.New(client)
//	relay, err := outbox.NewRelay(outbox.RelayOptions{Outbox: box,
//		Senders: map[string]outbox.Sender{sqsoutbox.Scheme: sender}})
//	box.Enqueue(ctx, tx, outbox.Message{URL: sqsoutbox.URL(queueURL, orderID), Body: event,
//		Header: http.Header{"Idempotency-Key": {orderID}}})
//
// Exactly once. The relay sends at least once: a relay that dies after
// SQS took a message and before it recorded that sends it again after
// its lease, with the same ID. A FIFO queue drops that second send if it
// comes within five minutes (SQS's deduplication interval); a standard
// queue keeps both, and may itself deliver one message twice. A consumer
// that runs each message once per business key, as queue/sqs does with
// the Idempotency-Key attribute as its default key, runs the second as a
// duplicate.
package sqsoutbox

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"

	"github.com/retryhttp/retryhttp/outbox"
)

// Scheme is the URL scheme a relay's Senders map this Sender under.
const Scheme = "sqs"

// MessageIDAttribute is the message attribute that carries the outbox
// message's ID.
const MessageIDAttribute = "Outbox-Message-Id"

// KeyHeader is the header whose value is a FIFO message's group when the
// URL names none: the Idempotency-Key every outbox message is delivered
// with (the message's own, or else its ID; see outbox.Message.Header),
// sent as the attribute of that name that queue/sqs's consumers key by.
const KeyHeader = "Idempotency-Key"

// maxAttributes is how many message attributes SQS carries: the
// MessageIDAttribute and the Idempotency-Key count among them, so a
// message reaches SQS with at most eight header names besides its key.
const maxAttributes = 10

// URL is the outbox URL of a message for the queue at queueURL (as SQS
// gives it: https://sqs.region.amazonaws.com/account/name), with key as a
// FIFO queue's MessageGroupId: "sqs:" + queueURL, query-escaped, and
// "?group=" + key when key is not "".
func URL(queueURL, key string) string {
	u := Scheme + ":" + url.QueryEscape(queueURL)
	if key != "" {
		u += "?group=" + url.QueryEscape(key)
	}
	return u
}

// Sender sends outbox messages to SQS. It is safe for concurrent use.
type Sender struct {
	cl *awssqs.Client
}

// New returns a Sender sending through cl.
func New(cl *awssqs.Client) (*Sender, error) {
	if cl == nil {
		return nil, errors.New("sqsoutbox: nil client")
	}
	return &Sender{cl: cl}, nil
}

// Send implements outbox.Sender: it sends d to the queue its URL names,
// with d's header as message attributes (one per header, its values
// joined by ", "; an empty one is left out) and d.ID as MessageIDAttribute;
// a queue whose name ends in .fifo gets d.ID as the deduplication ID and
// the URL's group (or d's KeyHeader) as the group. A URL without a queue,
// more attributes than the ten SQS carries (MessageIDAttribute and the
// Idempotency-Key among them: eight other header names at most) and a
// message SQS refuses for good (too large, invalid characters) are refused
// for good; a queue that does not exist is a failure, retried (it may be
// created meanwhile).
func (s *Sender) Send(ctx context.Context, d outbox.Delivery) outbox.Result {
	queueURL, group, err := parse(d.URL)
	if err != nil {
		return outbox.Result{Err: err, Final: true}
	}
	attrs := map[string]types.MessageAttributeValue{MessageIDAttribute: stringAttribute(d.ID)}
	for k, vs := range d.Header {
		if v := strings.Join(vs, ", "); v != "" {
			attrs[k] = stringAttribute(v)
		}
	}
	if len(attrs) > maxAttributes {
		return outbox.Result{Err: fmt.Errorf("sqsoutbox: %d attributes (%d header names, the Idempotency-Key among them, and %s) are more than the %d SQS carries",
			len(attrs), len(attrs)-1, MessageIDAttribute, maxAttributes), Final: true}
	}
	in := &awssqs.SendMessageInput{QueueUrl: aws.String(queueURL), MessageBody: aws.String(string(d.Body)), MessageAttributes: attrs}
	if strings.HasSuffix(queueURL, ".fifo") {
		if group == "" {
			group = d.Header.Get(KeyHeader)
		}
		if group == "" {
			group = d.ID
		}
		in.MessageGroupId, in.MessageDeduplicationId = aws.String(group), aws.String(d.ID)
	}
	if _, err := s.cl.SendMessage(ctx, in); err != nil {
		var api smithy.APIError
		final := errors.As(err, &api) && refusedForGood[api.ErrorCode()]
		return outbox.Result{Err: fmt.Errorf("sqsoutbox: send to %s: %w", queueURL, err), Final: final}
	}
	return outbox.Result{}
}

// refusedForGood are the error codes of a message SQS will never take
// as it is: too large (InvalidParameterValue), characters outside its
// set, an attribute it does not accept.
var refusedForGood = map[string]bool{
	"InvalidParameterValue":  true,
	"InvalidMessageContents": true,
	"InvalidAttributeName":   true,
	"InvalidAttributeValue":  true,
}

func stringAttribute(v string) types.MessageAttributeValue {
	return types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(v)}
}

// parse reads the queue URL and group of a URL made by URL.
func parse(u *url.URL) (queueURL, group string, err error) {
	raw, err := url.QueryUnescape(u.Opaque)
	if err == nil {
		var q *url.URL
		if q, err = url.Parse(raw); err == nil && (q.Scheme != "http" && q.Scheme != "https" || q.Host == "" || q.Path == "") {
			err = errors.New("not an http or https queue URL")
		}
	}
	if err == nil {
		var query url.Values
		if query, err = url.ParseQuery(u.RawQuery); err == nil {
			return raw, query.Get("group"), nil
		}
	}
	return "", "", fmt.Errorf("sqsoutbox: %q names no queue (want %s): %v", u.String(), URL("https://sqs.region.amazonaws.com/account/name", "key"), err)
}

package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/retryhttp/retryhttp/outbox"
	"github.com/retryhttp/retryhttp/outbox/kafkaoutbox"
	"github.com/retryhttp/retryhttp/outbox/natsoutbox"
)

// events is the third layer's broker: where the checkout's "order
// placed" goes, and where the fulfilment consumer reads it. NATS
// JetStream or Kafka.
type events interface {
	// publish sends an order's event at once (each layer on its own:
	// before the checkout's commit).
	publish(ctx context.Context, order int) error
	// url is the outbox URL of an order's event (with the pieces), and
	// sender the relay's Sender for it.
	url(order int) string
	sender() (scheme string, s outbox.Sender, err error)
	// drained reports whether the fulfilment consumers have finished
	// every event.
	drained(ctx context.Context) (bool, error)
	// args are the flags a consumer process finds the events with.
	args() []string
	close()
}

func event(order int) []byte { return fmt.Appendf(nil, `{"order":%d}`, order) }

// openEvents makes the run's stream (NATS) or topic (Kafka), and nil
// when the config has neither.
func openEvents(ctx context.Context, cfg Config, suffix string) (events, error) {
	switch {
	case cfg.Kafka != "":
		e, err := openKafka(ctx, cfg.Kafka, suffix)
		if err != nil {
			return nil, err
		}
		return e, nil
	case cfg.NATS != "":
		e, err := openNATS(ctx, cfg.NATS, suffix)
		if err != nil {
			return nil, err
		}
		return e, nil
	}
	return nil, nil
}

// natsEvents is a JetStream stream of the run's own and its durable
// consumer.
type natsEvents struct {
	url_, name, subject string
	nc                  *nats.Conn
	js                  jetstream.JetStream
}

func openNATS(ctx context.Context, url, suffix string) (*natsEvents, error) {
	nc, err := nats.Connect(url)
	if err != nil {
		return nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, err
	}
	e := &natsEvents{url_: url, name: "CHECKOUT_" + suffix, subject: "checkout." + suffix + ".placed", nc: nc, js: js}
	// A short ack wait, so that what a killed consumer held comes back soon.
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: e.name, Subjects: []string{e.subject}}); err != nil {
		nc.Close()
		return nil, err
	}
	if _, err := js.CreateOrUpdateConsumer(ctx, e.name, jetstream.ConsumerConfig{Durable: "fulfilment",
		AckPolicy: jetstream.AckExplicitPolicy, AckWait: time.Second}); err != nil {
		e.close()
		return nil, err
	}
	return e, nil
}

func (e *natsEvents) publish(ctx context.Context, order int) error {
	_, err := e.js.Publish(ctx, e.subject, event(order))
	return err
}

func (e *natsEvents) url(int) string { return natsoutbox.URL(e.subject) } // published with its ID as Nats-Msg-Id

func (e *natsEvents) sender() (string, outbox.Sender, error) {
	s, err := natsoutbox.New(e.js)
	return natsoutbox.Scheme, s, err
}

// drained reports whether the durable consumer has acknowledged every
// message of the stream.
func (e *natsEvents) drained(ctx context.Context) (bool, error) {
	s, err := e.js.Stream(ctx, e.name)
	if err != nil {
		return false, err
	}
	info, err := s.Info(ctx)
	if err != nil {
		return false, err
	}
	c, err := s.Consumer(ctx, "fulfilment")
	if err != nil {
		return false, err
	}
	ci, err := c.Info(ctx)
	if err != nil {
		return false, err
	}
	return ci.NumAckPending == 0 && ci.NumPending == 0 && ci.AckFloor.Stream >= info.State.LastSeq, nil
}

func (e *natsEvents) args() []string {
	return []string{"-nats", e.url_, "-stream", e.name, "-durable", "fulfilment"}
}

func (e *natsEvents) close() {
	e.js.DeleteStream(context.Background(), e.name)
	e.nc.Close()
}

// kafkaEvents is a topic of the run's own, with 4 partitions, read by
// the consumer group "fulfilment".
type kafkaEvents struct {
	addr, topic string
	cl          *kgo.Client
}

func openKafka(ctx context.Context, addr, suffix string) (*kafkaEvents, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		return nil, err
	}
	e := &kafkaEvents{addr: addr, topic: "checkout-" + suffix + "-placed", cl: cl}
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 4, -1, nil, e.topic); err != nil {
		cl.Close()
		return nil, err
	}
	return e, nil
}

func (e *kafkaEvents) publish(ctx context.Context, order int) error {
	return e.cl.ProduceSync(ctx, &kgo.Record{Topic: e.topic, Key: fmt.Appendf(nil, "order-%d", order), Value: event(order)}).FirstErr()
}

// url keys the record by its order: one order's events in one partition.
func (e *kafkaEvents) url(order int) string {
	return kafkaoutbox.URL(e.topic, fmt.Sprint("order-", order))
}

func (e *kafkaEvents) sender() (string, outbox.Sender, error) {
	s, err := kafkaoutbox.New(e.cl)
	return kafkaoutbox.Scheme, s, err
}

// drained reports whether the group has committed every partition's end.
func (e *kafkaEvents) drained(ctx context.Context) (bool, error) {
	adm := kadm.NewClient(e.cl)
	ends, err := adm.ListEndOffsets(ctx, e.topic)
	if err != nil {
		return false, err
	}
	committed, err := adm.FetchOffsets(ctx, "fulfilment")
	if err != nil {
		return false, err
	}
	ok := true
	ends.Each(func(o kadm.ListedOffset) {
		if c, found := committed.Lookup(e.topic, o.Partition); o.Offset > 0 && (!found || c.At < o.Offset) {
			ok = false
		}
	})
	return ok, nil
}

func (e *kafkaEvents) args() []string { return []string{"-kafka", e.addr, "-topic", e.topic} }

func (e *kafkaEvents) close() {
	kadm.NewClient(e.cl).DeleteTopic(context.Background(), e.topic)
	e.cl.Close()
}

var errNotDrained = errors.New("the fulfilment consumer did not finish the events in time")

package docs

import (
	"reflect"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/twmb/franz-go/pkg/kgo"

	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/retryhttp/retryhttp/queue"
	"github.com/retryhttp/retryhttp/queue/kafka"
	"github.com/retryhttp/retryhttp/queue/natsjs"
	"github.com/retryhttp/retryhttp/queue/rabbitmq"
	"github.com/retryhttp/retryhttp/queue/sqs"
)

// Every consumer's Options carry the settings all consumers share under
// the names and types of queue.Config (so with its zero values, which
// queue.NewCore resolves for all of them), and no second name for one of
// them.
func TestConsumerOptionsAgree(t *testing.T) {
	shared := []string{"Runner", "Key", "MaxAttempts", "Backoff", "Logger", "Hooks"}
	for name, pair := range map[string][2]reflect.Type{
		"natsjs":   {reflect.TypeFor[natsjs.Options](), reflect.TypeFor[queue.Config[jetstream.Msg]]()},
		"rabbitmq": {reflect.TypeFor[rabbitmq.Options](), reflect.TypeFor[queue.Config[amqp.Delivery]]()},
		"kafka":    {reflect.TypeFor[kafka.Options](), reflect.TypeFor[queue.Config[*kgo.Record]]()},
		"sqs":      {reflect.TypeFor[sqs.Options](), reflect.TypeFor[queue.Config[sqstypes.Message]]()},
	} {
		opts, config := pair[0], pair[1]
		for _, f := range shared {
			got, ok := opts.FieldByName(f)
			want, _ := config.FieldByName(f)
			if !ok || got.Type != want.Type {
				t.Errorf("%s.Options.%s: %v, want %v as in queue.Config", name, f, got.Type, want.Type)
			}
		}
		for _, other := range []string{"MaxDeliveries", "MaxReceives", "Policy", "Hook", "Metrics"} {
			if _, ok := opts.FieldByName(other); ok {
				t.Errorf("%s.Options.%s: a second name for a shared setting", name, other)
			}
		}
	}
	// One event type for every consumer.
	for name, pair := range map[string][2]reflect.Type{
		"natsjs":   {reflect.TypeFor[natsjs.Event](), reflect.TypeFor[queue.Event[jetstream.Msg]]()},
		"rabbitmq": {reflect.TypeFor[rabbitmq.Event](), reflect.TypeFor[queue.Event[amqp.Delivery]]()},
		"kafka":    {reflect.TypeFor[kafka.Event](), reflect.TypeFor[queue.Event[*kgo.Record]]()},
		"sqs":      {reflect.TypeFor[sqs.Event](), reflect.TypeFor[queue.Event[sqstypes.Message]]()},
	} {
		if pair[0] != pair[1] {
			t.Errorf("%s.Event is %v, not queue.Event", name, pair[0])
		}
	}
}

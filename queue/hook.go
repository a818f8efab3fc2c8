package queue

import "context"

// Hook observes a consumer wrapper, in the shape of retryhttp.Hook's
// OnEvent: an event E for each delivery's outcome. queue/natsjs,
// queue/rabbitmq, queue/kafka and queue/sqs each name theirs Hook, for
// their own Event.
type Hook[E any] interface {
	OnEvent(ctx context.Context, e E)
}

// HookFunc is a function that is a Hook.
type HookFunc[E any] func(ctx context.Context, e E)

// OnEvent calls f.
func (f HookFunc[E]) OnEvent(ctx context.Context, e E) { f(ctx, e) }

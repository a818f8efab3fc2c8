// Package queue is the core every queue consumer of this project shares:
// queue/natsjs, queue/rabbitmq, queue/kafka and queue/sqs (modules of
// their own) each turn their broker's message into a [Delivery] and hand
// it to one [Core.Process], which runs it once per key through an
// idempotency.Runner and settles it by its outcome. So every consumer has
// the same options under the same names and zero values (Runner, Key,
// MaxAttempts, Backoff, Logger, Hooks), the same outcomes ([EventKind]:
// processed, duplicate, failed, dead), the same [Event], log records and
// Prometheus series ([Metrics]).
//
// The rules, in the order Process applies them:
//   - A message whose Key fails has no key to run it once by: it is dead,
//     the handler not run.
//   - A message the broker counts past MaxAttempts (its consumers died on
//     it, or it failed too often) is not run again: it is dead, unless its
//     key has run, when it is a duplicate. SQS, whose redrive policy bounds
//     such receives itself, runs it (Config.RunPast).
//   - The handler runs under the key; a duplicate gets the stored result
//     without running it. A panic is a failure ([PanicError]).
//   - A failure is tried again after its [Backoff], until the attempt that
//     reaches MaxAttempts, which ends the message as dead; [Permanent]
//     ends it at once.
//   - A key running elsewhere (idempotency.ErrInFlight) and a run cut short
//     by the consumer's own context ending are never what ends a message:
//     the first is tried again after its backoff, the second handed back
//     at once.
//
// It also holds what a handler uses: [Permanent], for a message no
// redelivery can fix; and what a layer of your own may use: [Backoff] and
// [Sleep].
package queue

// Package overload bounds the work in flight, on both sides of a call.
//
// A retry brake (the Budget, the Breaker, the Throttle of package
// [github.com/retryhttp/retryhttp]) decides whether to send a request
// again; none bounds how many are sent at once. When a dependency slows
// down, a client that keeps its concurrency keeps adding to a queue it
// cannot see, its latency grows, its callers time out and retry, and the
// dependency ends up serving requests nobody waits for any more: the
// metastable failure of Bronson et al. (HotOS 2021).
//
// A [Limiter] is the client's half: set as Transport.Limit, it keeps an
// adaptive limit on the attempts in flight to each host, moved by the
// latency it observes: it keeps the latency within Options.Tolerance of
// the host's no-load latency, which holds the attempts in flight near what
// the host can serve and follows it when that changes (see [Options]). A
// caller over the limit waits in a bounded queue or is refused at once,
// nothing sent, with [ErrLimited].
//
// A [Shedder] is the server's half: a middleware that keeps the same kind
// of limit on the requests its handler runs, and refuses the ones over it
// with 503 and a Retry-After before they reach the handler, the least
// important first ([Priority]). Put it outside the idempotency middleware:
// a shed request claims no key, and its retry is a first attempt.
//
// A request's priority travels with it: [WithPriority] puts it in a
// context, a retryhttp.Transport sends it as the [PriorityHeader] header,
// and the Shedder of the service called reads it and puts it in the
// context of the handler, so that the calls the handler makes carry it on.
package overload

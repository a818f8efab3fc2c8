package overload

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"time"

	"github.com/retryhttp/retryhttp/internal/backlog"
	"github.com/retryhttp/retryhttp/internal/gradient"
)

// Shedder is a server middleware that keeps an adaptive limit on the
// requests its handler runs at once, and sheds the ones over it before
// they reach the handler: a 503 (or ShedOptions.Status) with a
// Retry-After, which a retryhttp.Transport's Throttle and Budget count as
// a refusal of the server's. The Retry-After is measured, not a fixed
// second: when the handler will have served the requests shed before,
// spread so that they do not come back together into the same overload.
//
// Priorities share the limit: a Sheddable request is admitted while fewer
// than half the limit are in flight, a Default one while fewer than 80%
// of it, a Critical one up to the limit itself; and a Critical request
// that finds the limit reached may wait in the queue (Options.Queue, for
// at most Options.MaxWait and never past its context) for the next slot
// to free, which goes to it before any other request. Under overload the
// requests in flight stay near the limit, so sheddable requests are
// refused first, and critical ones are served as long as they alone do
// not exceed what the handler can serve: a burst of sheddable work cannot
// take what critical work needs. Without a queue (its zero value), a
// critical request that finds the limit reached is shed too. The limit
// moves with the handler's latency as a Limiter's does (see Options):
// when the handler slows down because its dependency or its CPU is
// saturated, the limit comes down to about what it can serve.
//
// A request's priority is its PriorityHeader header's, or, without one,
// what WithPriority put in its context (a middleware outside the Shedder
// may set it from the caller's identity), or Default; the handler's
// context carries it, so that the calls the handler makes through a
// retryhttp.Transport send it on.
//
// Put the Shedder outside the idempotency middleware: a shed request
// claims no key, so its retry is a first attempt, not a 409.
//
// The zero Shedder sheds with the default Options and 503. It is safe for
// concurrent use.
type Shedder struct {
	opts    ShedOptions
	limiter Limiter
}

// ShedOptions configure a Shedder.
type ShedOptions struct {
	// Limit bounds and moves the limit, queues critical requests (Queue,
	// MaxWait), and names the Shedder's Events and metrics (Name, Hooks);
	// its zero fields take their defaults. A Shedder has one limit:
	// MaxKeys must be 0.
	Limit Options
	// Status is the status of a shed request: 503 (Service Unavailable)
	// or 429 (Too Many Requests). 0 means 503.
	Status int
}

// NewShedder returns a Shedder with the given options, or an error that
// names the first invalid one.
func NewShedder(opts ShedOptions) (*Shedder, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	return &Shedder{opts: opts, limiter: Limiter{opts: opts.Limit}}, nil
}

func (o ShedOptions) validate() error {
	if err := o.Limit.validate("NewShedder"); err != nil {
		return err
	}
	switch {
	case o.Limit.MaxKeys != 0:
		return fmt.Errorf("overload: NewShedder: MaxKeys %d: a Shedder has one limit, MaxKeys must be 0", o.Limit.MaxKeys)
	case o.Status != 0 && o.Status != http.StatusServiceUnavailable && o.Status != http.StatusTooManyRequests:
		return fmt.Errorf("overload: NewShedder: Status %d must be 503 or 429", o.Status)
	}
	return nil
}

// Handler returns next behind the Shedder.
func (s *Shedder) Handler(next http.Handler) http.Handler {
	lim := s.limiter.For("")
	status := s.opts.Status
	if status == 0 {
		status = http.StatusServiceUnavailable
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := requestPriority(r)
		var permit Permit
		ok := true
		if p == Critical {
			var err error
			permit, err = lim.acquire(r.Context(), Critical)
			ok = err == nil // ErrLimited, or the caller went away while it waited

		} else {
			permit, ok = lim.admit(r.Context(), share(p), p)
		}
		if !ok {
			w.Header().Set("Retry-After", strconv.Itoa(lim.retryAfter(p)))
			http.Error(w, "overloaded: request shed", status)
			return
		}
		defer permit.Done(false)
		if cur, had := PriorityFrom(r.Context()); !had || cur != p {
			r = r.WithContext(WithPriority(r.Context(), p))
		}
		next.ServeHTTP(w, r)
	})
}

// share is the percentage of the limit below which a request of
// priority p is admitted.
func share(p Priority) int64 {
	switch p {
	case Sheddable:
		return gradient.ShareSheddable
	}
	return gradient.ShareDefault
}

// retryAfter is the wait a shed request of priority p is told, in whole
// seconds: when the handler will have served the requests shed before it
// ([backlog.Horizon]). The handler serves the limit each latency of its
// last round (Little's law). Each shed request takes the next place after
// the horizon of the requests shed before it, one step of the time the
// handler takes to serve it: a sheddable request counts twice (it is
// admitted only below half the limit), and a critical one has a horizon
// of its own (it is admitted before any other). Their retries then come
// back spread at about the rate they can be served, instead of together a
// second later into the same overload.
func (lim *Limit) retryAfter(p Priority) int {
	lim.mu.Lock()
	defer lim.mu.Unlock()
	limit := max(1, lim.limit.Load())
	h := &lim.horizon[1]
	if p != Critical {
		limit = max(1, limit*share(p)/100)
		h = &lim.horizon[0]
	}
	return h.Wait(time.Now(), backlog.Step(lim.g.Latency(), limit), rand.Float64(), rand.Float64())
}

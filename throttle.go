package retryhttp

import (
	"errors"
	"fmt"
	"math"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/retryhttp/retryhttp/internal/defaults"
	"github.com/retryhttp/retryhttp/internal/throttle"
	"github.com/retryhttp/retryhttp/internal/window"
)

// ErrThrottled is returned, wrapped in a *RetryError with
// ReasonThrottled, when a Throttle rejects an attempt locally: the host
// has been rejecting most of what it was sent. Nothing was sent.
var ErrThrottled = errors.New("retryhttp: throttled")

// Throttle is adaptive client-side throttling, as the Google SRE book
// describes it (chapter 21, "Handling Overload"): per host, it keeps over
// the last Window the attempts the Transport asked to send (requests) and
// those the host accepted (accepts), and rejects each new attempt locally,
// before it is sent, with probability
//
//	max(0, (requests − K·accepts) / (requests + 1))
//
// so that a host rejecting most of its traffic stops being sent what it
// would reject, and a client's attempts settle near K times what the host
// accepts. Local rejections count as requests, not accepts; first attempts
// and retries alike are throttled and counted.
//
// An attempt is accepted unless it ends in a network error (not the
// caller's cancellation, which is not counted), a 5xx, a 429, or another
// 4xx carrying a wait the Transport honours (Retry-After or a rate-limit
// hint, see Transport.Hints): those are the host saying it cannot take
// the load.
//
// Where the Breaker stops all traffic to a host that is down and the
// Budget caps what retries add, the Throttle sheds the share of traffic an
// overloaded host is rejecting anyway. Transport.RoundTrip's doc gives the
// order in which the brakes are asked.
//
// The Throttle is not priority-aware: a Critical request
// (overload.WithPriority) is rejected as often as any other. Its ratio
// measures what the host accepts of this client's traffic as a whole, and
// a host that sheds by priority (overload.Shedder) accepts critical
// requests longer, so that their successes already count as accepts; a
// client that exempted them would spend the host's capacity on the
// requests it rejects. Where critical traffic must not be throttled, send
// it through a Transport without a Throttle.
//
// The zero Throttle uses the defaults. A Throttle is safe for concurrent
// use; share one *Throttle among the Transports that call the same hosts.
// It must not be copied after first use.
type Throttle struct {
	settings ThrottleOptions
	once     sync.Once

	hosts sync.Map   // hostID -> *hostThrottle
	mu    sync.Mutex // serialises adding and evicting hosts
	n     int        // hosts tracked; guarded by mu
}

// ThrottleOptions configure a Throttle. Each zero field takes the default
// in its comment.
type ThrottleOptions struct {
	// K is how many attempts per accepted one a host is sent before
	// local rejections start: 2 lets a client send twice what the host
	// accepts, which keeps enough traffic flowing to see it recover. It
	// must be at least 1. 0 means 2.
	K float64
	// Window is how long an attempt counts: an accepted one from the time
	// it was sent, any other from the time it ended. 0 means
	// 2m.
	Window time.Duration
	// MinRequests is how many attempts the window must hold before
	// anything is rejected locally, so that a client's first failures do
	// not throttle its first retries: with one failed attempt and none
	// accepted, the formula alone rejects the retry half the time. 0 means
	// 20; it counts first attempts and retries.
	MinRequests int
	// MaxHosts bounds the hosts tracked; past it, a host that rejected
	// nothing in its window is forgotten first. 0 means
	// 1024.
	MaxHosts int
}

// NewThrottle returns a Throttle with the given settings, rejecting a K
// below 1 and negative durations and sizes.
func NewThrottle(s ThrottleOptions) (*Throttle, error) {
	switch {
	case s.K != 0 && !(s.K >= 1) || math.IsInf(s.K, 0):
		return nil, fmt.Errorf("retryhttp: NewThrottle: K %v must be a finite number >= 1", s.K)
	case s.Window < 0:
		return nil, fmt.Errorf("retryhttp: NewThrottle: Window %v is negative", s.Window)
	case s.Window > 0 && s.Window < window.Buckets*time.Millisecond:
		return nil, fmt.Errorf("retryhttp: NewThrottle: Window %v is shorter than %v", s.Window, window.Buckets*time.Millisecond)
	case s.MaxHosts < 0:
		return nil, fmt.Errorf("retryhttp: NewThrottle: MaxHosts %d is negative", s.MaxHosts)
	case s.MinRequests < 0:
		return nil, fmt.Errorf("retryhttp: NewThrottle: MinRequests %d is negative", s.MinRequests)
	}
	t := &Throttle{settings: s}
	t.init()
	return t, nil
}

func (t *Throttle) init() {
	t.once.Do(func() {
		s := &t.settings
		if s.K == 0 {
			s.K = defaults.ThrottleK
		}
		if s.Window == 0 {
			s.Window = defaults.ThrottleWindow
		}
		if s.MaxHosts == 0 {
			s.MaxHosts = defaults.ThrottleMaxHosts
		}
		if s.MinRequests == 0 {
			s.MinRequests = defaults.ThrottleMinRequests
		}
	})
}

// hostThrottle is one host's counts, and its name for errors.
type hostThrottle struct {
	name    string
	h       *throttle.Host
	evicted atomic.Bool // forgotten by the Throttle: a cached pointer to it is stale
}

// RejectProbability returns the probability that the next attempt to host
// is rejected locally. host is a URL's scheme and authority, as for
// Breaker.State; a host not tracked has 0.
func (t *Throttle) RejectProbability(host string) float64 {
	u, err := url.Parse(host)
	if err != nil {
		return 0
	}
	t.init()
	if v, ok := t.hosts.Load(hostOf(u)); ok {
		return v.(*hostThrottle).h.Probability(t.settings.K, clockNow())
	}
	return 0
}

// host returns u's counts, adding them if they are new.
func (t *Throttle) host(u *url.URL) *hostThrottle {
	id := hostOf(u)
	if v, ok := t.hosts.Load(id); ok {
		return v.(*hostThrottle)
	}
	t.init()
	t.mu.Lock()
	defer t.mu.Unlock()
	if v, ok := t.hosts.Load(id); ok {
		return v.(*hostThrottle)
	}
	if t.n >= t.settings.MaxHosts {
		t.evict()
	}
	h := &hostThrottle{name: id.String(), h: throttle.New(t.settings.Window, t.settings.MinRequests)}
	t.hosts.Store(id, h)
	t.n++
	return h
}

// evict forgets a host that rejected nothing in its window, or, when every
// host did, any one. t.mu must be held.
func (t *Throttle) evict() {
	var victim any
	t.hosts.Range(func(k, v any) bool {
		if victim == nil {
			victim = k
		}
		if !v.(*hostThrottle).h.Rejecting() {
			victim = k
			return false
		}
		return true
	})
	if victim != nil {
		if v, ok := t.hosts.LoadAndDelete(victim); ok {
			v.(*hostThrottle).evicted.Store(true)
			t.n--
		}
	}
}

// allow decides one attempt at now; draw, uniform in [0, 1), is called
// only when the probability of a rejection is not 0.
func (h *hostThrottle) allow(k float64, now time.Time, draw func() float64) error {
	if !h.h.Allow(k, now, draw) {
		return fmt.Errorf("%w: %s", ErrThrottled, h.name)
	}
	return nil
}

// report counts the outcome of an attempt allow let through: a response
// below 400 at a.sentAt(), the time the attempt was sent, which the caller has
// read already; anything else at now, the time it ended, read only then
// (as the Breaker counts).
func (h *hostThrottle) report(r *rules, a *sentAttempt) {
	switch {
	case a.err != nil && a.req.Context().Err() != nil:
		return // the caller gave up: nothing learnt of the host
	case a.err != nil:
		h.h.Count(false, a.ended())
	case a.resp.StatusCode < 400:
		h.h.Count(true, a.sentAt())
	default:
		at := a.ended()
		h.h.Count(r.accepted(a.resp, at), at)
	}
}

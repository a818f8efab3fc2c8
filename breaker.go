package retryhttp

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/retryhttp/retryhttp/internal/circuit"
	"github.com/retryhttp/retryhttp/internal/defaults"
	"github.com/retryhttp/retryhttp/internal/window"
)

// ErrCircuitOpen is returned, wrapped in a *RetryError, when a Breaker
// refuses the first attempt of a request: the host failed too often and has
// not recovered yet. Nothing was sent.
var ErrCircuitOpen = errors.New("retryhttp: circuit open")

// CircuitState is the state of one host's circuit.
type CircuitState int

const (
	// CircuitClosed: attempts flow; failures are counted.
	CircuitClosed CircuitState = 0
	// CircuitHalfOpen: a few probe attempts decide whether to close.
	CircuitHalfOpen CircuitState = 1
	// CircuitOpen: attempts fail fast with ErrCircuitOpen.
	CircuitOpen CircuitState = 2
)

func (s CircuitState) String() string {
	switch s {
	case CircuitClosed:
		return "closed"
	case CircuitHalfOpen:
		return "half-open"
	case CircuitOpen:
		return "open"
	}
	return fmt.Sprintf("CircuitState(%d)", int(s))
}

// BreakerOptions configure a Breaker. Each zero field takes the default in
// its comment.
//
// Two rules open a circuit. Consecutive failures (Failures) are the
// default: they trip a host that is down at once, after a handful of
// attempts. A failure ratio (FailureRatio over Window, once MinCalls were
// made) also trips a host that fails most calls with an occasional
// success between them, which resets a consecutive count; set
// FailureRatio to use it. With FailureRatio set and Failures 0, the ratio
// alone decides; with both set, either rule opens the circuit.
type BreakerOptions struct {
	// Failures is the number of consecutive failed attempts that opens a
	// host's circuit. 0 means 5, unless FailureRatio
	// is set: then 0 means no consecutive-failure rule.
	Failures uint32
	// FailureRatio, if above 0, opens a host's circuit when failed
	// attempts make at least this share (0 < FailureRatio ≤ 1) of the
	// attempts in the last Window, once there are at least MinCalls of
	// them. 0 means no ratio rule.
	FailureRatio float64
	// Window is the rolling window FailureRatio is measured over, counted
	// in tenths of it. A success counts from the time its attempt was
	// sent, a failure from the time it ended, so a timeout longer than the
	// window still counts. 0 means 30s.
	Window time.Duration
	// MinCalls is the least number of attempts in the window before the
	// ratio may open the circuit, so that two failures out of three calls
	// do not. 0 means 20.
	MinCalls uint32
	// OpenFor is how long an open circuit fails fast before letting probes
	// through. 0 means 30s.
	OpenFor time.Duration
	// Probes is the number of attempts let through while half-open; all must
	// succeed to close the circuit, one failure opens it again. 0 means
	// 1.
	Probes uint32
	// MaxHosts bounds the hosts tracked. Past it, a host is forgotten to
	// make room: one whose circuit holds nothing (closed, no failure
	// counted), since forgetting it loses nothing; only when every tracked
	// host is failing, the least recently used one. So a failing host keeps
	// its circuit, and keeps being protected, however many healthy hosts
	// pass through, as long as fewer than MaxHosts fail at once. 0 means
	// 1024.
	MaxHosts int
	// OnStateChange, if set, is called after every transition, with the
	// host as the circuit_state label names it, outside the Breaker's
	// locks. It must be quick: it runs on the goroutine of the request
	// that caused the transition.
	OnStateChange func(host string, from, to CircuitState)
}

// Breaker keeps one circuit per host (scheme, host and port) so that a
// Transport stops sending to a host that keeps failing, and fails fast
// instead of adding load while it recovers. Failures are network errors and
// 502, 503 and 504 responses; 4xx, 429 included, are not: backpressure is
// what Retry-After and the Budget are for.
//
// Each circuit follows sony/gobreaker's semantics: consecutive failures
// (or a failure ratio, see BreakerOptions) open it, it fails fast for
// OpenFor, then Probes attempts decide, and a generation counter drops
// late outcomes of an earlier state. Unlike gobreaker it takes no lock
// while closed, which is where a healthy service spends its life, and
// with the consecutive rule alone reads no clock either.
//
// The zero Breaker uses the defaults. A Breaker is safe for concurrent use
// and may be shared by Transports; it must not be copied after first use.
type Breaker struct {
	settings BreakerOptions
	once     sync.Once
	circuit  circuit.Settings

	// circuits maps a hostID to its *hostCircuit. Lookups, one per attempt,
	// take no lock; mu serialises adding and evicting hosts.
	circuits sync.Map
	mu       sync.Mutex
	ring     []*hostCircuit // the tracked hosts, in CLOCK order; guarded by mu
	hand     int            // the CLOCK hand; guarded by mu
}

// hostID names a circuit: scheme, host name and port, the port made
// explicit so that https://a and https://a:443 share one. Its fields are
// substrings of the URL or constants, so building it allocates nothing.
type hostID struct{ scheme, host, port string }

// String is the host as labels, errors and Breaker.State name it: the
// scheme and the authority, its port only when it is not the scheme's
// default ("https://api.example.com", "http://127.0.0.1:8080"), as a URL
// is usually written.
func (h hostID) String() string {
	if h.port == "" || h.scheme == "https" && h.port == "443" || h.scheme == "http" && h.port == "80" {
		if strings.Contains(h.host, ":") {
			return h.scheme + "://[" + h.host + "]"
		}
		return h.scheme + "://" + h.host
	}
	return h.scheme + "://" + net.JoinHostPort(h.host, h.port)
}

type hostCircuit struct {
	id      hostID
	name    string
	c       *circuit.Circuit
	evicted atomic.Bool // forgotten by the Breaker: a cached pointer to it is stale
	// used is CLOCK's reference bit: set by attempts, cleared by the hand.
	// It is written only when it is not set already, so that goroutines
	// calling one host do not bounce its cache line.
	used atomic.Bool
}

// NewBreaker returns a Breaker with the given settings, rejecting negative
// durations and sizes.
func NewBreaker(s BreakerOptions) (*Breaker, error) {
	switch {
	case s.OpenFor < 0:
		return nil, fmt.Errorf("retryhttp: NewBreaker: OpenFor %v is negative", s.OpenFor)
	case s.MaxHosts < 0:
		return nil, fmt.Errorf("retryhttp: NewBreaker: MaxHosts %d is negative", s.MaxHosts)
	case s.Failures > circuit.MaxFailures:
		return nil, fmt.Errorf("retryhttp: NewBreaker: Failures %d is more than %d", s.Failures, circuit.MaxFailures)
	case !(s.FailureRatio >= 0 && s.FailureRatio <= 1): // NaN too
		return nil, fmt.Errorf("retryhttp: NewBreaker: FailureRatio %v is not between 0 and 1", s.FailureRatio)
	case s.Window < 0:
		return nil, fmt.Errorf("retryhttp: NewBreaker: Window %v is negative", s.Window)
	case s.Window > 0 && s.Window < window.Buckets*time.Millisecond:
		return nil, fmt.Errorf("retryhttp: NewBreaker: Window %v is shorter than %v", s.Window, window.Buckets*time.Millisecond)
	}
	b := &Breaker{settings: s}
	b.init()
	return b, nil
}

func (b *Breaker) init() {
	b.once.Do(func() {
		s := &b.settings
		if s.Failures == 0 && s.FailureRatio == 0 {
			s.Failures = defaults.BreakerFailures
		}
		if s.Window == 0 {
			s.Window = defaults.BreakerWindow
		}
		if s.MinCalls == 0 {
			s.MinCalls = defaults.BreakerMinCalls
		}
		if s.OpenFor == 0 {
			s.OpenFor = defaults.BreakerOpenFor
		}
		if s.Probes == 0 {
			s.Probes = defaults.BreakerProbes
		}
		if s.MaxHosts == 0 {
			s.MaxHosts = defaults.BreakerMaxHosts
		}
		b.circuit = circuit.Settings{Failures: s.Failures, Probes: s.Probes, OpenFor: s.OpenFor,
			Ratio: s.FailureRatio, MinCalls: s.MinCalls, Window: s.Window}
	})
}

// circuitFor returns id's circuit, adding it if it is new.
func (b *Breaker) circuitFor(id hostID) *hostCircuit {
	if v, ok := b.circuits.Load(id); ok {
		hc := v.(*hostCircuit)
		if !hc.used.Load() {
			hc.used.Store(true)
		}
		return hc
	}
	b.init()
	b.mu.Lock()
	defer b.mu.Unlock()
	if v, ok := b.circuits.Load(id); ok { // added while we waited
		return v.(*hostCircuit)
	}
	hc := &hostCircuit{id: id, name: id.String()}
	var onChange func(from, to circuit.State)
	if f := b.settings.OnStateChange; f != nil {
		onChange = func(from, to circuit.State) { f(hc.name, CircuitState(from), CircuitState(to)) }
	}
	hc.c = circuit.New(&b.circuit, onChange)
	hc.used.Store(true)
	if len(b.ring) < b.settings.MaxHosts {
		b.ring = append(b.ring, hc)
	} else {
		b.ring[b.evict()] = hc
	}
	b.circuits.Store(id, hc)
	return hc
}

// evict forgets one host and returns its slot in the ring. It takes the
// first host, from the hand on, whose circuit holds nothing (closed, no
// failure counted), since forgetting it loses nothing: with a share f of
// such hosts that costs 1/f steps on average. Only when every tracked host
// is failing does it fall back to CLOCK: skip, clearing their reference
// bits, the hosts used since the hand last passed, and take the first that
// was not. b.mu must be held.
func (b *Breaker) evict() int {
	n := len(b.ring)
	for range n {
		if slot := b.advance(); b.ring[slot].c.Idle() {
			return b.forget(slot)
		}
	}
	for range n {
		slot := b.advance()
		if hc := b.ring[slot]; hc.used.Load() {
			hc.used.Store(false)
			continue
		}
		return b.forget(slot)
	}
	return b.forget(b.advance()) // every bit was set: the first turn cleared them
}

// advance moves the hand and returns the slot it was on. b.mu must be held.
func (b *Breaker) advance() int {
	slot := b.hand
	b.hand = (b.hand + 1) % len(b.ring)
	return slot
}

// forget drops the host in slot from the lookup map. b.mu must be held.
func (b *Breaker) forget(slot int) int {
	b.ring[slot].evicted.Store(true)
	b.circuits.Delete(b.ring[slot].id)
	return slot
}

// State returns the state of a host's circuit. host is a URL's scheme and
// authority as the circuit_state label shows it, "https://api.example.com"
// (the scheme's default port written or not: "https://api.example.com:443"
// is the same host); a host not tracked, or not a URL, is closed.
func (b *Breaker) State(host string) CircuitState {
	u, err := url.Parse(host)
	if err != nil {
		return CircuitClosed
	}
	return b.state(hostOf(u))
}

// state returns the state of id's circuit without creating one. A circuit
// whose open period has ended reports half-open.
func (b *Breaker) state(id hostID) CircuitState {
	if v, ok := b.circuits.Load(id); ok {
		return CircuitState(v.(*hostCircuit).c.State(clockNow))
	}
	return CircuitClosed
}

// eachState calls f with the state of every tracked host.
func (b *Breaker) eachState(f func(host string, s CircuitState)) {
	b.circuits.Range(func(_, v any) bool {
		hc := v.(*hostCircuit)
		f(hc.name, CircuitState(hc.c.State(clockNow)))
		return true
	})
}

// allow asks the circuit for one attempt: the ticket its report hands
// back, and whether the attempt may be sent (refused is the error when it
// may not). It is inlined into the gate's allow.
func (hc *hostCircuit) allow() (circuit.Ticket, bool) { return hc.c.Allow(clockNow) }

// refused is the error of an attempt the open circuit refused.
func (hc *hostCircuit) refused() error { return fmt.Errorf("%w: %s", ErrCircuitOpen, hc.name) }

// report tells the circuit an attempt's outcome, admitted with its
// ticket: a failure of the host (a network error, 502, 503, 504), nothing
// at all (the caller gave up, which says nothing about the host), or a
// success. A success is counted at a.sentAt(), the time the attempt was
// sent, which the caller has read already; anything else at a.ended(), the
// time it ended, read only then. A success that took longer than the
// window is no longer counted, which can only lower the ratio's
// denominator by the slowest calls; a failure, a timeout above all, always
// counts.
func (hc *hostCircuit) report(a *sentAttempt) {
	switch {
	case a.err != nil && a.req.Context().Err() != nil:
		hc.c.Report(a.ticket, circuit.Excluded, a.ended)
	case a.err != nil || hostFailureStatus(a.resp.StatusCode):
		hc.c.Report(a.ticket, circuit.Failure, a.ended)
	case !hc.c.Quiet(a.ticket): // a success: counted, unless it changes nothing
		hc.c.Report(a.ticket, circuit.Success, a.sentAt)
	}
}

// isOpen reports whether the circuit is open at now: no attempt would be
// let through.
func (hc *hostCircuit) isOpen(now time.Time) bool {
	return CircuitState(hc.c.State(func() time.Time { return now })) == CircuitOpen
}

// hostOf names the circuit of a URL.
func hostOf(u *url.URL) hostID {
	port := u.Port()
	if port == "" {
		switch u.Scheme {
		case "https":
			port = "443"
		case "http":
			port = "80"
		}
	}
	return hostID{scheme: u.Scheme, host: u.Hostname(), port: port}
}

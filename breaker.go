package retryhttp

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sony/gobreaker/v2"
)

// ErrCircuitOpen is returned, wrapped, when a Breaker refuses an attempt:
// the host failed too often and has not recovered yet. Nothing was sent.
var ErrCircuitOpen = errors.New("retryhttp: circuit open")

// CircuitState is the state of one host's circuit.
type CircuitState int

const (
	// CircuitClosed: attempts flow; failures are counted.
	CircuitClosed CircuitState = iota
	// CircuitHalfOpen: a few probe attempts decide whether to close.
	CircuitHalfOpen
	// CircuitOpen: attempts fail fast with ErrCircuitOpen.
	CircuitOpen
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

// BreakerSettings configure a Breaker. Each zero field takes the default in
// its comment.
type BreakerSettings struct {
	// Failures is the number of consecutive failed attempts that opens a
	// host's circuit. 0 means 5.
	Failures uint32
	// OpenFor is how long an open circuit fails fast before letting probes
	// through. 0 means 30s.
	OpenFor time.Duration
	// Probes is the number of attempts let through while half-open; all must
	// succeed to close the circuit, one failure opens it again. 0 means 1.
	Probes uint32
	// MaxHosts bounds the hosts tracked; past it the least recently used
	// host is forgotten (its circuit starts closed if it comes back).
	// 0 means 1024.
	MaxHosts int
	// OnStateChange, if set, is called on every transition. It runs while
	// the host's circuit is locked: it must be quick and must not call the
	// Breaker.
	OnStateChange func(host string, from, to CircuitState)
}

// Breaker keeps one circuit per host (scheme, host and port) so that a
// Transport stops sending to a host that keeps failing, and fails fast
// instead of adding load while it recovers. Failures are network errors and
// 502, 503 and 504 responses; 4xx, 429 included, are not: backpressure is
// what Retry-After and the Budget are for.
//
// Each circuit is a sony/gobreaker two-step breaker: Allow before the
// attempt, report after it, which fits a RoundTrip whose outcome arrives
// later. A Breaker is safe for concurrent use and may be shared.
type Breaker struct {
	settings BreakerSettings

	// circuits maps a hostID to its *hostCircuit. Lookups, one per attempt,
	// take no lock; mu serialises adding and evicting hosts.
	circuits sync.Map
	mu       sync.Mutex
	n        int // circuits held; guarded by mu
}

// hostID names a circuit: scheme, host name and port, the port made
// explicit so that https://a and https://a:443 share one. Its fields are
// substrings of the URL or constants, so building it allocates nothing.
type hostID struct{ scheme, host, port string }

func (h hostID) String() string { return h.scheme + "://" + net.JoinHostPort(h.host, h.port) }

type hostCircuit struct {
	id       hostID
	name     string
	cb       *gobreaker.TwoStepCircuitBreaker[struct{}]
	lastUsed atomic.Int64 // unix nanoseconds, for eviction
}

// touchEvery is the resolution of a circuit's last use: eviction only needs
// to tell recent hosts from stale ones, and not writing the shared field on
// every attempt keeps goroutines calling one host off each other's cache
// line.
const touchEvery = 100 * time.Millisecond

func (hc *hostCircuit) touch(now time.Time) {
	if t := now.UnixNano(); t-hc.lastUsed.Load() >= int64(touchEvery) {
		hc.lastUsed.Store(t)
	}
}

// NewBreaker returns a Breaker with the given settings, rejecting negative
// durations and sizes.
func NewBreaker(s BreakerSettings) (*Breaker, error) {
	if s.OpenFor < 0 {
		return nil, fmt.Errorf("retryhttp: NewBreaker: OpenFor %v is negative", s.OpenFor)
	}
	if s.MaxHosts < 0 {
		return nil, fmt.Errorf("retryhttp: NewBreaker: MaxHosts %d is negative", s.MaxHosts)
	}
	if s.Failures == 0 {
		s.Failures = 5
	}
	if s.OpenFor == 0 {
		s.OpenFor = 30 * time.Second
	}
	if s.Probes == 0 {
		s.Probes = 1
	}
	if s.MaxHosts == 0 {
		s.MaxHosts = 1024
	}
	return &Breaker{settings: s}, nil
}

// errBreakerFailure and errBreakerExcluded are the outcomes reported to a
// circuit: a failure of the host, or an attempt the caller abandoned, which
// says nothing about the host.
var (
	errBreakerFailure  = errors.New("host failure")
	errBreakerExcluded = errors.New("caller cancelled")
)

func (b *Breaker) circuit(id hostID, now time.Time) *hostCircuit {
	if v, ok := b.circuits.Load(id); ok {
		hc := v.(*hostCircuit)
		hc.touch(now)
		return hc
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if v, ok := b.circuits.Load(id); ok { // added while we waited
		return v.(*hostCircuit)
	}
	if b.n >= b.settings.MaxHosts {
		b.evictOldest()
	}
	hc := &hostCircuit{id: id, name: id.String()}
	hc.touch(now)
	hc.cb = gobreaker.NewTwoStepCircuitBreaker[struct{}](gobreaker.Settings{
		Name:        hc.name,
		MaxRequests: b.settings.Probes,
		Timeout:     b.settings.OpenFor,
		ReadyToTrip: func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= b.settings.Failures },
		IsExcluded:  func(err error) bool { return errors.Is(err, errBreakerExcluded) },
		OnStateChange: func(name string, from, to gobreaker.State) {
			if b.settings.OnStateChange != nil {
				b.settings.OnStateChange(name, CircuitState(from), CircuitState(to))
			}
		},
	})
	b.circuits.Store(id, hc)
	b.n++
	return hc
}

// evictOldest forgets the least recently used host. It scans every
// circuit, which happens only when a new host arrives at a full Breaker.
// b.mu must be held.
func (b *Breaker) evictOldest() {
	var oldest *hostCircuit
	b.circuits.Range(func(_, v any) bool {
		hc := v.(*hostCircuit)
		if oldest == nil || hc.lastUsed.Load() < oldest.lastUsed.Load() {
			oldest = hc
		}
		return true
	})
	if oldest != nil {
		b.circuits.Delete(oldest.id)
		b.n--
	}
}

// State returns the state of a host's circuit, named as
// "https://api.example.com:443". A host not tracked is closed.
func (b *Breaker) State(host string) CircuitState {
	var state CircuitState
	b.circuits.Range(func(_, v any) bool {
		hc := v.(*hostCircuit)
		if hc.name == host {
			state = CircuitState(hc.cb.State())
			return false
		}
		return true
	})
	return state
}

// state returns the state of id's circuit without creating one.
func (b *Breaker) state(id hostID) CircuitState {
	if v, ok := b.circuits.Load(id); ok {
		return CircuitState(v.(*hostCircuit).cb.State())
	}
	return CircuitClosed
}

// states returns the state of every tracked host, for the circuit_state
// gauge. A circuit whose open period has ended reports half-open.
func (b *Breaker) states() map[string]CircuitState {
	out := map[string]CircuitState{}
	b.circuits.Range(func(_, v any) bool {
		hc := v.(*hostCircuit)
		out[hc.name] = CircuitState(hc.cb.State())
		return true
	})
	return out
}

// allow asks id's circuit for one attempt; report takes the attempt's
// outcome (see breakerOutcome).
func (b *Breaker) allow(id hostID, now time.Time) (report func(error), err error) {
	hc := b.circuit(id, now)
	report, err = hc.cb.Allow()
	if err != nil {
		return nil, fmt.Errorf("%w: %s", ErrCircuitOpen, hc.name)
	}
	return report, nil
}

// breakerOutcome is what an attempt tells its host's circuit: a failure of
// the host (a network error, 502, 503, 504), nothing at all (the caller
// gave up, which says nothing about the host), or a success.
func breakerOutcome(req *http.Request, resp *http.Response, err error) error {
	switch {
	case err != nil && req.Context().Err() != nil:
		return errBreakerExcluded
	case err != nil:
		return errBreakerFailure
	case resp.StatusCode == http.StatusBadGateway || resp.StatusCode == http.StatusServiceUnavailable ||
		resp.StatusCode == http.StatusGatewayTimeout:
		return errBreakerFailure
	}
	return nil
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

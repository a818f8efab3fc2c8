package retryhttp

import (
	"container/list"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sync"
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

	mu    sync.Mutex
	hosts map[string]*list.Element // of *hostCircuit; guarded by mu
	lru   list.List                // front = most recently used; guarded by mu
}

type hostCircuit struct {
	host string
	cb   *gobreaker.TwoStepCircuitBreaker[struct{}]
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
	return &Breaker{settings: s, hosts: map[string]*list.Element{}}, nil
}

// errBreakerFailure and errBreakerExcluded are the outcomes reported to a
// circuit: a failure of the host, or an attempt the caller abandoned, which
// says nothing about the host.
var (
	errBreakerFailure  = errors.New("host failure")
	errBreakerExcluded = errors.New("caller cancelled")
)

func (b *Breaker) circuit(host string) *gobreaker.TwoStepCircuitBreaker[struct{}] {
	b.mu.Lock()
	defer b.mu.Unlock()
	if e, ok := b.hosts[host]; ok {
		b.lru.MoveToFront(e)
		return e.Value.(*hostCircuit).cb
	}
	if b.lru.Len() >= b.settings.MaxHosts {
		oldest := b.lru.Back()
		hc := oldest.Value.(*hostCircuit)
		b.lru.Remove(oldest)
		delete(b.hosts, hc.host)
	}
	cb := gobreaker.NewTwoStepCircuitBreaker[struct{}](gobreaker.Settings{
		Name:        host,
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
	b.hosts[host] = b.lru.PushFront(&hostCircuit{host: host, cb: cb})
	return cb
}

// State returns the state of host's circuit ("https://api.example.com:443").
// A host not tracked is closed.
func (b *Breaker) State(host string) CircuitState {
	b.mu.Lock()
	e, ok := b.hosts[host]
	b.mu.Unlock()
	if !ok {
		return CircuitClosed
	}
	return CircuitState(e.Value.(*hostCircuit).cb.State())
}

// states returns the state of every tracked host, for the circuit_state
// gauge. A circuit whose open period has ended reports half-open.
func (b *Breaker) states() map[string]CircuitState {
	b.mu.Lock()
	circuits := make([]*hostCircuit, 0, b.lru.Len())
	for e := b.lru.Front(); e != nil; e = e.Next() {
		circuits = append(circuits, e.Value.(*hostCircuit))
	}
	b.mu.Unlock()
	out := make(map[string]CircuitState, len(circuits))
	for _, hc := range circuits {
		out[hc.host] = CircuitState(hc.cb.State())
	}
	return out
}

// allow asks host's circuit for one attempt. The returned done reports the
// attempt's outcome.
func (b *Breaker) allow(host string) (done func(req *http.Request, resp *http.Response, err error), err error) {
	report, err := b.circuit(host).Allow()
	if err != nil {
		return nil, fmt.Errorf("%w: %s", ErrCircuitOpen, host)
	}
	return func(req *http.Request, resp *http.Response, err error) {
		switch {
		case err != nil && req.Context().Err() != nil:
			report(errBreakerExcluded)
		case err != nil:
			report(errBreakerFailure)
		case resp.StatusCode == http.StatusBadGateway || resp.StatusCode == http.StatusServiceUnavailable ||
			resp.StatusCode == http.StatusGatewayTimeout:
			report(errBreakerFailure)
		default:
			report(nil)
		}
	}, nil
}

// hostKey names the circuit of a URL: scheme, host and port, the port made
// explicit so that https://a and https://a:443 share one circuit.
func hostKey(u *url.URL) string {
	port := u.Port()
	if port == "" {
		switch u.Scheme {
		case "https":
			port = "443"
		case "http":
			port = "80"
		}
	}
	return u.Scheme + "://" + u.Hostname() + ":" + port
}

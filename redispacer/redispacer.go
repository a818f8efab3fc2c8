// Package redispacer keeps a [retryhttp.Pacer]'s quotas in Redis, so that
// the processes that call one API with one key (a service's replicas, a
// fleet of workers) pace themselves as one client does: each request takes
// its slot from the one window they all read and tell.
//
//	rdb := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
//	store, err := redispacer.New(rdb, redispacer.Options{})
//	pacer := &retryhttp.Pacer{Store: store} // in every process
//
// Each host's quota is one key, updated by compare-and-set: a read, then a
// script that writes only if the key still holds what was read (two round
// trips; when another process wrote meanwhile, both again). A Pacer updates
// it two or three times for each request it sends to a host that sends
// rate-limit headers, every 50 ms for each request held while a window's
// first request learns the new quota, and never for a host that sends
// none. The processes' clocks must agree to
// well within a second (NTP does): a window's reset is a time of day.
//
// Nothing here must survive a restart or an eviction: a quota Redis drops
// is learnt again from the next response. A Redis that fails or stalls
// past Options.Timeout leaves the Pacers pacing nothing until it is back
// (the Pacer logs it once). go-redis lets a context's deadline cut a
// stalled read only with redis.Options.ContextTimeoutEnabled: set it on
// the client, or its ReadTimeout (3 s by default) is how long a request
// may wait for a Redis that accepts and does not answer.
package redispacer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// Store is a [retryhttp.PacerStore] on Redis. It is safe for concurrent
// use.
type Store struct {
	client  redis.UniversalClient
	prefix  string
	timeout time.Duration
	ttl     int64 // milliseconds
}

const (
	// DefaultPrefix is put before every key when Options.Prefix is "".
	DefaultPrefix = "retryhttp:pace:"
	// DefaultTimeout bounds each update when Options.Timeout is 0: a
	// request waits at most this long for a stalled Redis before it goes
	// unpaced.
	DefaultTimeout = 250 * time.Millisecond
	// DefaultTTL is how long a quota no process updates is kept when
	// Options.TTL is 0: longer than the day the Pacer caps a window at,
	// so that a spent quota is not forgotten before it resets.
	DefaultTTL = 25 * time.Hour
)

// Options configure New. The zero value is ready to use.
type Options struct {
	// Prefix is put before every key; "" means DefaultPrefix. Pacers
	// that must not share their quotas (two API keys on one host) need
	// prefixes of their own.
	Prefix string
	// Timeout bounds each update, its retries included; 0 means
	// DefaultTimeout. It cuts a stalled read only on a client with
	// ContextTimeoutEnabled (see the package doc).
	Timeout time.Duration
	// TTL is how long a host's quota is kept after its last update; 0
	// means DefaultTTL.
	TTL time.Duration
}

// New returns a Store on client: a *redis.Client, or a
// *redis.ClusterClient or *redis.Ring, since each quota is one key read
// and written by single-key commands (the tests run on a single server).
func New(client redis.UniversalClient, o Options) (*Store, error) {
	if client == nil {
		return nil, errors.New("redispacer: nil client")
	}
	if o.Timeout < 0 || o.TTL < 0 {
		return nil, fmt.Errorf("redispacer: Options.Timeout %v and TTL %v: want 0 (the default) or more", o.Timeout, o.TTL)
	}
	if o.TTL > 0 && o.TTL < time.Millisecond {
		return nil, fmt.Errorf("redispacer: Options.TTL %v: under Redis's millisecond", o.TTL)
	}
	s := &Store{client: client, prefix: o.Prefix, timeout: o.Timeout, ttl: o.TTL.Milliseconds()}
	if s.prefix == "" {
		s.prefix = DefaultPrefix
	}
	if s.timeout == 0 {
		s.timeout = DefaultTimeout
	}
	if s.ttl == 0 {
		s.ttl = DefaultTTL.Milliseconds()
	}
	return s, nil
}

// casScript sets KEYS[1] to ARGV[2], expiring in ARGV[3] ms, if it still
// holds ARGV[1] ("" for no value): 1 if it did, 0 if another process
// wrote it since it was read.
var casScript = redis.NewScript(`
local cur = redis.call('GET', KEYS[1])
if cur == false then cur = '' end
if cur ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
return 1
`)

// Update calls f with the state under key and stores what f returns, if
// no other process stored a state under key meanwhile; if one did, it
// calls f again with the new state, until it succeeds or Options.Timeout
// passes.
func (s *Store) Update(ctx context.Context, key string, f func(state []byte) []byte) error {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	k := s.prefix + key
	for {
		old, err := s.client.Get(ctx, k).Bytes()
		if errors.Is(err, redis.Nil) {
			old, err = nil, nil
		}
		if err != nil {
			return fmt.Errorf("redispacer: reading %s: %w", k, err)
		}
		state := f(bytes.Clone(old))
		if len(state) == 0 {
			return fmt.Errorf("redispacer: an empty state for %s", k) // "" is no value: a write of it would be lost
		}
		set, err := casScript.Run(ctx, s.client, []string{k}, old, state, s.ttl).Int()
		if err != nil {
			return fmt.Errorf("redispacer: writing %s: %w", k, err)
		}
		if set == 1 {
			return nil
		}
	}
}

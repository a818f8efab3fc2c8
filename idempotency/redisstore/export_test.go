package redisstore

import "github.com/redis/go-redis/v9"

// UseClaimScript makes s claim as it does on Redis 6.2, so that the
// conformance suite covers that path on a newer server too.
func UseClaimScript(s *Store) { s.legacy.Store(true) }

// WithClient returns a Store on s's keys that reaches Redis through c: a
// second instance of one service.
func (s *Store) WithClient(c redis.UniversalClient) *Store {
	return &Store{client: c, prefix: s.prefix}
}

package redisstore

// UseClaimScript makes s claim as it does on Redis 6.2, so that the
// conformance suite covers that path on a newer server too.
func UseClaimScript(s *Store) { s.legacy.Store(true) }

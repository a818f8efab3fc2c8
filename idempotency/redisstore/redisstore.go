// Package redisstore keeps idempotency records in Redis, for several
// processes behind one endpoint. Redis 7.0 or later (SET with NX and GET).
//
// A claim is one SET NX PX, atomic on the server; completing and releasing
// are compare-and-set scripts that act only while the value still names the
// caller's owner token. Records expire by Redis's own TTL, so nothing needs
// sweeping. Records live as long as Redis keeps them: run it with
// persistence if a restart must not forget completed keys.
package redisstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/retryhttp/retryhttp/idempotency"
)

// Store is an idempotency.Store on Redis. It is safe for concurrent use.
type Store struct {
	client redis.UniversalClient
	prefix string
}

// DefaultPrefix is put before every key when New is given "".
const DefaultPrefix = "idempotency:"

// New returns a Store that keeps its records under prefix+key.
func New(client redis.UniversalClient, prefix string) (*Store, error) {
	if client == nil {
		return nil, errors.New("redisstore: nil client")
	}
	if prefix == "" {
		prefix = DefaultPrefix
	}
	return &Store{client: client, prefix: prefix}, nil
}

// A value is "<owner>|<record JSON>" while in flight and "done|<record
// JSON>" once complete, so the scripts can check ownership with a prefix
// comparison instead of decoding JSON.
const donePrefix = "done|"

// completeScript replaces the value with ARGV[2] for ARGV[3] ms if it still
// belongs to owner ARGV[1].
var completeScript = redis.NewScript(`
local v = redis.call('GET', KEYS[1])
if not v or string.sub(v, 1, string.len(ARGV[1]) + 1) ~= ARGV[1] .. '|' then return 0 end
redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
return 1`)

// releaseScript deletes the value if it still belongs to owner ARGV[1].
var releaseScript = redis.NewScript(`
local v = redis.call('GET', KEYS[1])
if not v or string.sub(v, 1, string.len(ARGV[1]) + 1) ~= ARGV[1] .. '|' then return 0 end
return redis.call('DEL', KEYS[1])`)

func ms(d time.Duration) int64 { return max(1, d.Milliseconds()) }

// Claim implements idempotency.Store.
func (s *Store) Claim(ctx context.Context, key, fingerprint, owner string, lock time.Duration) (*idempotency.Record, error) {
	if strings.Contains(owner, "|") || owner == "done" {
		return nil, fmt.Errorf("redisstore: invalid owner token %q", owner)
	}
	val, err := json.Marshal(idempotency.Record{Fingerprint: fingerprint})
	if err != nil {
		return nil, err
	}
	old, err := s.client.SetArgs(ctx, s.prefix+key, owner+"|"+string(val), redis.SetArgs{
		Mode: "NX", TTL: time.Duration(ms(lock)) * time.Millisecond, Get: true,
	}).Result()
	if errors.Is(err, redis.Nil) {
		return nil, nil // the key was free and is now ours
	}
	if err != nil {
		return nil, fmt.Errorf("redisstore: claim: %w", err)
	}
	_, data, ok := strings.Cut(old, "|")
	if !ok {
		return nil, fmt.Errorf("redisstore: malformed record under %s", s.prefix+key)
	}
	var rec idempotency.Record
	if err := json.Unmarshal([]byte(data), &rec); err != nil {
		return nil, fmt.Errorf("redisstore: malformed record under %s: %w", s.prefix+key, err)
	}
	return &rec, nil
}

// Complete implements idempotency.Store.
func (s *Store) Complete(ctx context.Context, key, owner string, resp *idempotency.Response, retention time.Duration) error {
	// The stored record keeps the claim's fingerprint, read here rather
	// than in the script to keep JSON out of Lua; the script's owner check
	// makes the read-then-write safe.
	cur, err := s.client.Get(ctx, s.prefix+key).Result()
	if errors.Is(err, redis.Nil) {
		return idempotency.ErrNotOwner
	}
	if err != nil {
		return fmt.Errorf("redisstore: complete: %w", err)
	}
	if !strings.HasPrefix(cur, owner+"|") {
		return idempotency.ErrNotOwner
	}
	var claimed idempotency.Record
	if err := json.Unmarshal([]byte(cur[len(owner)+1:]), &claimed); err != nil {
		return fmt.Errorf("redisstore: malformed record under %s: %w", s.prefix+key, err)
	}
	rec, err := json.Marshal(idempotency.Record{Fingerprint: claimed.Fingerprint, Response: resp})
	if err != nil {
		return err
	}
	n, err := completeScript.Run(ctx, s.client, []string{s.prefix + key}, owner, donePrefix+string(rec), ms(retention)).Int()
	if err != nil {
		return fmt.Errorf("redisstore: complete: %w", err)
	}
	if n == 0 {
		return idempotency.ErrNotOwner
	}
	return nil
}

// Release implements idempotency.Store.
func (s *Store) Release(ctx context.Context, key, owner string) error {
	if err := releaseScript.Run(ctx, s.client, []string{s.prefix + key}, owner).Err(); err != nil {
		return fmt.Errorf("redisstore: release: %w", err)
	}
	return nil
}

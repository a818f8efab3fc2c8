// Package redisstore keeps idempotency records in Redis, for several
// processes behind one endpoint. Redis 7.0 or later; on 6.2 a claim is a
// script instead of a plain command.
//
// Every operation is one command, atomic on the server and one round trip:
// a claim takes a free key or reads the live record (SET NX GET);
// completing, extending and releasing are scripts that act only while the
// value still names the caller's owner token. A new key costs two commands
// (claim, complete), a replay one plain read.
// Records expire by Redis's own TTL, so nothing needs sweeping. Records
// live as long as Redis keeps them: run it with persistence if a restart
// must not forget completed keys.
package redisstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/retryhttp/retryhttp/idempotency"
	"github.com/retryhttp/retryhttp/internal/headerjson"
)

// Store is an idempotency.Store on Redis. It is safe for concurrent use.
type Store struct {
	client redis.UniversalClient
	prefix string
	legacy atomic.Bool // the server is older than 7.0: claim with claimScript
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

// Values: "f|<owner>|<fingerprint>" while in flight, "d|<fingerprint>|<response>"
// once complete. Owners and fingerprints hold no '|', so the scripts check
// ownership with a prefix comparison, and completing moves the
// fingerprint over without Go reading it back.
//
// A claim is one plain command, SET NX GET (Redis 7.0): it takes a free
// key, or returns the live value without writing. A replay is then a read
// with no script to run. Only a claim that finds another owner's claim in
// flight asks for the time it has left, with PTTL. On Redis 6.2, where
// SET cannot combine NX and GET, claimScript does the same in one script.
//
// claimScript: take a free key (0), find it already ours (1: a repeated
// claim), or return the live value and its remaining milliseconds.
var claimScript = redis.NewScript(`
local v = redis.call('GET', KEYS[1])
if not v then
	redis.call('SET', KEYS[1], 'f|' .. ARGV[1] .. '|' .. ARGV[2], 'PX', ARGV[3])
	return 0
end
local mine = 'f|' .. ARGV[1] .. '|'
if string.sub(v, 1, #mine) == mine then return 1 end
return {v, redis.call('PTTL', KEYS[1])}`)

// completeScript: owner ARGV[1]'s claim becomes the completed record with
// response ARGV[2], kept ARGV[3] ms.
var completeScript = redis.NewScript(`
local v = redis.call('GET', KEYS[1])
local mine = 'f|' .. ARGV[1] .. '|'
if not v or string.sub(v, 1, #mine) ~= mine then return 0 end
redis.call('SET', KEYS[1], 'd|' .. string.sub(v, #mine + 1) .. '|' .. ARGV[2], 'PX', ARGV[3])
return 1`)

// extendScript: owner ARGV[1]'s claim now expires in ARGV[2] ms.
var extendScript = redis.NewScript(`
local v = redis.call('GET', KEYS[1])
local mine = 'f|' .. ARGV[1] .. '|'
if not v or string.sub(v, 1, #mine) ~= mine then return 0 end
return redis.call('PEXPIRE', KEYS[1], ARGV[2])`)

// releaseScript: owner ARGV[1]'s claim is deleted.
var releaseScript = redis.NewScript(`
local v = redis.call('GET', KEYS[1])
local mine = 'f|' .. ARGV[1] .. '|'
if not v or string.sub(v, 1, #mine) ~= mine then return 0 end
return redis.call('DEL', KEYS[1])`)

func ms(d time.Duration) int64 { return max(1, d.Milliseconds()) }

func checkToken(what, v string) error {
	if v == "" || strings.Contains(v, "|") {
		return fmt.Errorf("redisstore: invalid %s %q", what, v)
	}
	return nil
}

// Claim implements idempotency.Store.
func (s *Store) Claim(ctx context.Context, key, fingerprint, owner string, lock time.Duration) (*idempotency.Record, error) {
	if err := checkToken("owner token", owner); err != nil {
		return nil, err
	}
	if err := checkToken("fingerprint", fingerprint); err != nil {
		return nil, err
	}
	k := s.prefix + key
	if s.legacy.Load() {
		return s.claimByScript(ctx, k, fingerprint, owner, lock)
	}
	v, err := s.client.SetArgs(ctx, k, "f|"+owner+"|"+fingerprint, redis.SetArgs{Mode: "NX", TTL: time.Duration(ms(lock)) * time.Millisecond, Get: true}).Result()
	switch {
	case errors.Is(err, redis.Nil):
		return nil, nil // taken
	case err != nil && strings.Contains(err.Error(), "syntax error"):
		s.legacy.Store(true) // NX with GET is Redis 7.0's
		return s.claimByScript(ctx, k, fingerprint, owner, lock)
	case err != nil:
		return nil, fmt.Errorf("redisstore: claim: %w", err)
	case strings.HasPrefix(v, "f|"+owner+"|"):
		return nil, nil // ours already: a repeated claim
	}
	rec, err := decode(v)
	if err != nil {
		return nil, fmt.Errorf("redisstore: malformed record under %s: %w", k, err)
	}
	if rec.Response == nil {
		// In flight under another owner: how long it may still hold. The
		// key may have gone meanwhile; then the default Retry-After holds.
		if pttl, err := s.client.PTTL(ctx, k).Result(); err == nil && pttl > 0 {
			rec.Expires = time.Now().Add(pttl)
		}
	}
	return rec, nil
}

func (s *Store) claimByScript(ctx context.Context, k, fingerprint, owner string, lock time.Duration) (*idempotency.Record, error) {
	res, err := claimScript.Run(ctx, s.client, []string{k}, owner, fingerprint, ms(lock)).Result()
	if err != nil {
		return nil, fmt.Errorf("redisstore: claim: %w", err)
	}
	if _, ok := res.(int64); ok {
		return nil, nil // taken, or ours already
	}
	pair, ok := res.([]any)
	if !ok || len(pair) != 2 {
		return nil, fmt.Errorf("redisstore: claim: unexpected reply %v", res)
	}
	v, _ := pair[0].(string)
	pttl, _ := pair[1].(int64)
	rec, err := decode(v)
	if err != nil {
		return nil, fmt.Errorf("redisstore: malformed record under %s: %w", k, err)
	}
	if pttl > 0 && rec.Response == nil {
		rec.Expires = time.Now().Add(time.Duration(pttl) * time.Millisecond)
	}
	return rec, nil
}

// Extend implements idempotency.Store.
func (s *Store) Extend(ctx context.Context, key, owner string, lock time.Duration) error {
	n, err := extendScript.Run(ctx, s.client, []string{s.prefix + key}, owner, ms(lock)).Int()
	if err != nil {
		return fmt.Errorf("redisstore: extend: %w", err)
	}
	if n == 0 {
		return idempotency.ErrNotOwner
	}
	return nil
}

// Complete implements idempotency.Store.
func (s *Store) Complete(ctx context.Context, key, owner string, resp *idempotency.Response, retention time.Duration) error {
	payload, err := encode(resp)
	if err != nil {
		return err
	}
	n, err := completeScript.Run(ctx, s.client, []string{s.prefix + key}, owner, payload, ms(retention)).Int()
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

// A stored response is "<status>[ t]\n<header JSON>\n<body>": the status
// (and t when too large), the header as JSON (which never holds a raw
// newline), and the body's bytes as they are.
func encode(resp *idempotency.Response) ([]byte, error) {
	b := make([]byte, 0, 256+len(resp.Body))
	b = strconv.AppendInt(b, int64(resp.Status), 10)
	if resp.TooLarge {
		b = append(b, " t"...)
	}
	b = append(b, '\n')
	b, err := headerjson.Append(b, resp.Header)
	if err != nil {
		return nil, fmt.Errorf("redisstore: complete: %w", err)
	}
	b = append(b, '\n')
	return append(b, resp.Body...), nil
}

// decode reads a value: an in-flight claim or a completed record.
func decode(v string) (*idempotency.Record, error) {
	kind, rest, ok := strings.Cut(v, "|")
	if !ok {
		return nil, errors.New("no kind")
	}
	switch kind {
	case "f":
		_, fp, ok := strings.Cut(rest, "|")
		if !ok {
			return nil, errors.New("no fingerprint")
		}
		return &idempotency.Record{Fingerprint: fp}, nil
	case "d":
		fp, payload, ok := strings.Cut(rest, "|")
		if !ok {
			return nil, errors.New("no fingerprint")
		}
		resp, err := decodeResponse([]byte(payload))
		if err != nil {
			return nil, err
		}
		return &idempotency.Record{Fingerprint: fp, Response: resp}, nil
	}
	return nil, fmt.Errorf("unknown kind %q", kind)
}

func decodeResponse(p []byte) (*idempotency.Response, error) {
	line, rest, ok := bytes.Cut(p, []byte("\n"))
	if !ok {
		return nil, errors.New("no status line")
	}
	header, body, ok := bytes.Cut(rest, []byte("\n"))
	if !ok {
		return nil, errors.New("no header line")
	}
	resp := &idempotency.Response{}
	status, flags, _ := bytes.Cut(line, []byte(" "))
	n, err := strconv.Atoi(string(status))
	if err != nil {
		return nil, fmt.Errorf("status: %w", err)
	}
	resp.Status, resp.TooLarge = n, string(flags) == "t"
	if resp.Header, err = headerjson.Parse(header); err != nil {
		return nil, fmt.Errorf("header: %w", err)
	}
	if len(body) > 0 {
		resp.Body = body
	}
	return resp, nil
}

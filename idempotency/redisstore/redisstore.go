// Package redisstore keeps idempotency records in Redis, for several
// processes behind one endpoint. Redis 7.0 or later; on 6.2 a claim is a
// script instead of a plain command.
//
// Every operation is one command, atomic on the server and one round trip:
// a claim takes a free key or reads the live record (SET NX GET);
// completing, extending and releasing are scripts that act only while the
// value still names the caller's owner token. A new key costs two commands
// (claim, complete), a replay one plain read.
//
// Deployment. A record Redis drops is a retry that runs its handler again:
// a double charge. So:
//   - A Redis of its own, or one whose maxmemory-policy is noeviction. Any
//     other policy (allkeys-lru, the usual setting of a Redis that is also a
//     cache, and volatile-lru, since every record has a TTL) evicts records
//     under memory pressure. New refuses such a server, reading the policy
//     with CONFIG GET or, where a managed Redis hides CONFIG, from INFO
//     memory; Options.AllowEviction accepts the risk, and the Store then counts and
//     logs the records it finds gone (Vanished). A full noeviction Redis
//     refuses new claims (503, the handler does not run) and still serves
//     replays of completed keys: a refused claim falls back to a read.
//   - Persistence with the append-only file (appendonly yes, appendfsync
//     everysec or always). RDB snapshots alone lose the records written
//     since the last snapshot on a crash, and with them the completed keys.
//
// Records expire by Redis's own TTL, so nothing needs sweeping.
package redisstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/retryhttp/retryhttp/idempotency"
)

// Store is an idempotency.Store on Redis. It is safe for concurrent use.
type Store struct {
	client   redis.UniversalClient
	prefix   string
	o        Options
	legacy   atomic.Bool // the server is older than 7.0: claim with claimScript
	logger   *slog.Logger
	vanished atomic.Uint64

	unreplicated atomic.Uint64
}

// DefaultPrefix is put before every key when Options.Prefix is "".
const DefaultPrefix = "idempotency:"

// Options configure New. The zero value keeps records under DefaultPrefix
// on a Redis that must not evict them, and warns of one without the
// append-only file.
type Options struct {
	// Prefix is put before every key; "" means DefaultPrefix. Stores that
	// share a Redis and must not see each other's keys need prefixes of
	// their own.
	Prefix string

	// AllowEviction makes New accept a Redis whose maxmemory-policy may
	// evict records (anything but noeviction), or whose policy cannot be
	// read. An evicted record lets a retry run its handler again: set it
	// only where a repeated effect is tolerable, and watch Vanished.
	AllowEviction bool

	// RequirePersistence makes New refuse a Redis that does not write the
	// append-only file, or whose persistence cannot be read, where without
	// it New only logs a warning: a crash or a restart of such a server
	// forgets the completed keys, and their retries run the handler again.
	RequirePersistence bool

	// Replicas makes each completion wait, with Redis's WAIT, until that
	// many replicas of the key's master hold it, or ReplicaTimeout passes.
	// Redis replicates asynchronously: a master that acknowledged a
	// completion and died before a replica received it is replaced by a
	// replica without the record, and the next retry runs the handler
	// again. With the wait, a client is answered only once a replica holds
	// the record (or the timeout passed: Unreplicated counts those, and
	// each is logged at Warn). It costs about one round trip more per new
	// key; replays are unchanged. The client must then be a *redis.Client
	// or a *redis.ClusterClient. 0, the default, waits for none.
	Replicas int

	// ReplicaTimeout bounds the wait for Replicas; it must be positive
	// when Replicas is set.
	ReplicaTimeout time.Duration

	// Logger is where the Store reports records it finds gone, and New
	// its warning about a server without persistence; nil means
	// slog.Default().
	Logger *slog.Logger
}

// Unreplicated counts the completions that Options.Replicas waited for in
// vain: fewer replicas held them than wanted when the timeout passed. Each
// is a record a failover right then would lose.
func (s *Store) Unreplicated() uint64 { return s.unreplicated.Load() }

// New returns a Store on client. It asks the server for its
// maxmemory-policy and its persistence (two round trips, within a few
// seconds): it refuses one that can evict records, unless
// Options.AllowEviction is set, and warns of one without the append-only
// file (refuses it, with Options.RequirePersistence).
func New(client redis.UniversalClient, o Options) (*Store, error) {
	if client == nil {
		return nil, errors.New("redisstore: nil client")
	}
	s := &Store{client: client, prefix: o.Prefix, o: o, logger: o.Logger}
	if s.prefix == "" {
		s.prefix = DefaultPrefix
	}
	if s.logger == nil {
		s.logger = slog.Default()
	}
	if o.Replicas != 0 || o.ReplicaTimeout != 0 {
		switch client.(type) {
		case *redis.Client, *redis.ClusterClient:
		default:
			return nil, fmt.Errorf("redisstore: Options.Replicas needs a *redis.Client or a *redis.ClusterClient, not a %T", client)
		}
		if o.Replicas < 1 || o.ReplicaTimeout <= 0 {
			return nil, fmt.Errorf("redisstore: Options.Replicas %d with ReplicaTimeout %v: want at least 1 replica and a positive timeout", o.Replicas, o.ReplicaTimeout)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), policyTimeout)
	defer cancel()
	policy, err := evictionPolicy(ctx, client)
	switch {
	case err != nil && !o.AllowEviction:
		return nil, fmt.Errorf("redisstore: cannot read the server's maxmemory-policy (%w); records must not be evicted: "+
			"use a Redis with maxmemory-policy noeviction, or set Options.AllowEviction to accept the risk", err)
	case err == nil && policy != "noeviction" && !o.AllowEviction:
		return nil, fmt.Errorf("redisstore: the server's maxmemory-policy is %s, which evicts idempotency records under memory pressure, "+
			"and an evicted record lets a retry run its handler again; set maxmemory-policy noeviction "+
			"(CONFIG SET maxmemory-policy noeviction, or in redis.conf) on a Redis of its own, "+
			"or set Options.AllowEviction to accept the risk", policy)
	}
	aof, err := appendOnly(ctx, client)
	switch {
	case err != nil && o.RequirePersistence:
		return nil, fmt.Errorf("redisstore: cannot read the server's persistence (%w), and Options.RequirePersistence is set", err)
	case err != nil:
		s.logger.LogAttrs(ctx, slog.LevelWarn, "redisstore: cannot tell whether the server writes the append-only file; "+
			"without it a crash or restart forgets completed keys", slog.String("error", err.Error()))
	case !aof && o.RequirePersistence:
		return nil, errors.New(noAOF + "; Options.RequirePersistence refuses it")
	case !aof:
		s.logger.LogAttrs(ctx, slog.LevelWarn, noAOF+" (Options.RequirePersistence refuses such a server)")
	}
	return s, nil
}

// noAOF is what New says of a server without the append-only file.
const noAOF = "redisstore: the server does not write the append-only file (appendonly no): a crash or restart loses " +
	"the records written since its last RDB snapshot, and a retry of a lost key runs its handler again; " +
	"set appendonly yes with appendfsync everysec (CONFIG SET appendonly yes, and in redis.conf)"

// appendOnly reads whether the server writes the append-only file, from
// INFO persistence (where CONFIG may be hidden, INFO is not).
func appendOnly(ctx context.Context, c redis.UniversalClient) (bool, error) {
	info, err := c.Info(ctx, "persistence").Result()
	if err != nil {
		return false, err
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "aof_enabled:"); ok {
			return v == "1", nil
		}
	}
	return false, errors.New("INFO persistence has no aof_enabled")
}

// policyTimeout bounds New's question to the server.
const policyTimeout = 5 * time.Second

// evictionPolicy reads the server's maxmemory-policy: with CONFIG GET, or,
// where CONFIG is renamed or forbidden (managed Redis), from INFO memory.
func evictionPolicy(ctx context.Context, c redis.UniversalClient) (string, error) {
	if m, err := c.ConfigGet(ctx, "maxmemory-policy").Result(); err == nil {
		if p, ok := m["maxmemory-policy"]; ok && p != "" {
			return p, nil
		}
	}
	info, err := c.Info(ctx, "memory").Result()
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "maxmemory_policy:"); ok {
			return v, nil
		}
	}
	return "", errors.New("INFO memory has no maxmemory_policy")
}

// Vanished counts the claims this Store found gone when it came to extend
// or complete them: evicted, or expired under a handler that outlived its
// lock. Counted only with Options.AllowEviction; on a noeviction Redis a claim
// outlives its handler while the handler runs (see idempotency's
// ErrClaimLapsed).
func (s *Store) Vanished() uint64 { return s.vanished.Load() }

// gone reports a record found missing by op.
func (s *Store) gone(ctx context.Context, op string) {
	if !s.o.AllowEviction {
		return
	}
	s.vanished.Add(1)
	s.logger.LogAttrs(ctx, slog.LevelWarn, "redisstore: a claim was gone at "+op+": evicted, or expired; a retry may run its handler again",
		slog.String("op", op))
}

// Values: "f|<owner>|<fingerprint>" while in flight,
// "e|<expiry>|<fingerprint>|<response>" once complete, the expiry in Unix
// milliseconds of the server's clock, so that a replay knows it without a
// PTTL (a replay cache keeps the record until then). Records completed by
// earlier releases are "d|<fingerprint>|<response>", read as records of
// unknown expiry. Owners and fingerprints hold no '|', so the scripts
// check ownership with a prefix comparison, and completing moves the
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

// The scripts that act on a claim return -1 when the key is gone, 0 when
// another owner holds it, and 1 when they acted.
//
// completeScript: owner ARGV[1]'s claim becomes the completed record with
// response ARGV[2], kept ARGV[3] ms.
var completeScript = redis.NewScript(`
local v = redis.call('GET', KEYS[1])
if not v then return -1 end
local mine = 'f|' .. ARGV[1] .. '|'
if string.sub(v, 1, #mine) ~= mine then return 0 end
local t = redis.call('TIME')
local expiry = t[1] * 1000 + math.floor(t[2] / 1000) + tonumber(ARGV[3])
redis.call('SET', KEYS[1], 'e|' .. string.format('%d', expiry) .. '|' .. string.sub(v, #mine + 1) .. '|' .. ARGV[2], 'PX', ARGV[3])
return 1`)

// extendScript: owner ARGV[1]'s claim now expires in ARGV[2] ms.
var extendScript = redis.NewScript(`
local v = redis.call('GET', KEYS[1])
if not v then return -1 end
local mine = 'f|' .. ARGV[1] .. '|'
if string.sub(v, 1, #mine) ~= mine then return 0 end
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
func (s *Store) Claim(ctx context.Context, p idempotency.ClaimParams) (*idempotency.Record, error) {
	key, fingerprint, owner, lock := p.Key, p.Fingerprint, p.Owner, p.Lock
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
		return s.refused(ctx, k, owner, err)
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

// refused answers a claim the server refused. A full noeviction Redis
// refuses every write (OOM) but still reads: a completed record (or one in
// flight) is returned as the claim would have returned it, so replays go
// on; a free key stays an error, and the handler does not run.
func (s *Store) refused(ctx context.Context, k, owner string, err error) (*idempotency.Record, error) {
	if !strings.HasPrefix(err.Error(), "OOM ") {
		return nil, fmt.Errorf("redisstore: claim: %w", err)
	}
	v, gerr := s.client.Get(ctx, k).Result()
	if gerr != nil || strings.HasPrefix(v, "f|"+owner+"|") {
		return nil, fmt.Errorf("redisstore: claim: %w", err)
	}
	rec, derr := decode(v)
	if derr != nil {
		return nil, fmt.Errorf("redisstore: malformed record under %s: %w", k, derr)
	}
	return rec, nil
}

func (s *Store) claimByScript(ctx context.Context, k, fingerprint, owner string, lock time.Duration) (*idempotency.Record, error) {
	res, err := claimScript.Run(ctx, s.client, []string{k}, owner, fingerprint, ms(lock)).Result()
	if err != nil {
		return s.refused(ctx, k, owner, err)
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
func (s *Store) Extend(ctx context.Context, p idempotency.ExtendParams) error {
	key, owner, lock := p.Key, p.Owner, p.Lock
	n, err := extendScript.Run(ctx, s.client, []string{s.prefix + key}, owner, ms(lock)).Int()
	if err != nil {
		return fmt.Errorf("redisstore: extend: %w", err)
	}
	if n <= 0 {
		if n < 0 {
			s.gone(ctx, "extend")
		}
		return idempotency.ErrNotOwner
	}
	return nil
}

// Complete implements idempotency.Store.
func (s *Store) Complete(ctx context.Context, p idempotency.CompleteParams) error {
	key, owner, resp, retention := p.Key, p.Owner, p.Response, p.Retention
	payload, err := encode(resp)
	if err != nil {
		return err
	}
	var n int
	if s.o.Replicas > 0 {
		n, err = s.completeReplicated(ctx, s.prefix+key, owner, payload, retention)
	} else {
		n, err = completeScript.Run(ctx, s.client, []string{s.prefix + key}, owner, payload, ms(retention)).Int()
	}
	if err != nil {
		return fmt.Errorf("redisstore: complete: %w", err)
	}
	if n <= 0 {
		if n < 0 {
			s.gone(ctx, "complete")
		}
		return idempotency.ErrNotOwner
	}
	return nil
}

// completeReplicated runs the completion and WAIT on one connection to the
// key's master, in one pipeline, since WAIT waits for the writes of its own
// connection.
func (s *Store) completeReplicated(ctx context.Context, k, owner string, payload []byte, retention time.Duration) (int, error) {
	var node *redis.Client
	switch c := s.client.(type) {
	case *redis.ClusterClient:
		var err error
		if node, err = c.MasterForKey(ctx, k); err != nil {
			return 0, err
		}
	case *redis.Client:
		node = c
	}
	var done *redis.Cmd
	var acked *redis.Cmd
	_, err := node.Pipelined(ctx, func(p redis.Pipeliner) error {
		done = completeScript.Eval(ctx, p, []string{k}, owner, payload, ms(retention))
		acked = p.Do(ctx, "WAIT", s.o.Replicas, s.o.ReplicaTimeout.Milliseconds())
		return nil
	})
	if err != nil && done.Err() != nil {
		return 0, done.Err()
	}
	n, err := done.Int()
	if err != nil {
		return 0, err
	}
	if got, werr := acked.Int64(); n > 0 && (werr != nil || got < int64(s.o.Replicas)) {
		s.unreplicated.Add(1)
		s.logger.LogAttrs(ctx, slog.LevelWarn, "redisstore: a completed record is not on a replica yet; a failover now would lose it",
			slog.Int64("replicas", got), slog.Int("wanted", s.o.Replicas))
	}
	return n, nil
}

// Release implements idempotency.Store.
func (s *Store) Release(ctx context.Context, p idempotency.ReleaseParams) error {
	key, owner := p.Key, p.Owner
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
	header, err := idempotency.MarshalHeader(resp.Header)
	if err != nil {
		return nil, fmt.Errorf("redisstore: complete: %w", err)
	}
	b = append(b, header...)
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
	case "e":
		ms, rest, ok := strings.Cut(rest, "|")
		if !ok {
			return nil, errors.New("no expiry")
		}
		n, err := strconv.ParseInt(ms, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("expiry: %w", err)
		}
		rec, err := decodeDone(rest)
		if err == nil {
			rec.Expires = time.UnixMilli(n)
		}
		return rec, err
	case "d": // completed by an earlier release: no expiry kept
		return decodeDone(rest)
	}
	return nil, fmt.Errorf("unknown kind %q", kind)
}

// decodeDone reads "<fingerprint>|<response>".
func decodeDone(v string) (*idempotency.Record, error) {
	fp, payload, ok := strings.Cut(v, "|")
	if !ok {
		return nil, errors.New("no fingerprint")
	}
	resp, err := decodeResponse([]byte(payload))
	if err != nil {
		return nil, err
	}
	return &idempotency.Record{Fingerprint: fp, Response: resp}, nil
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
	if resp.Header, err = idempotency.UnmarshalHeader(header); err != nil {
		return nil, fmt.Errorf("header: %w", err)
	}
	if len(body) > 0 {
		resp.Body = body
	}
	return resp, nil
}

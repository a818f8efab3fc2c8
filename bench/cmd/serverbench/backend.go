package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/retryhttp/retryhttp/idempotency"
	"github.com/retryhttp/retryhttp/idempotency/pgstore"
	"github.com/retryhttp/retryhttp/idempotency/redisstore"
)

// backend is a store and the raw commands that are its protocol's floor:
// what a new key and a replay cannot do with less.
type backend struct {
	name  string
	store idempotency.Store
	// floorNew does what a new key needs at least: take the key, then
	// write the response to it. storeKey is in the form the middleware
	// stores (64 hex digits).
	floorNew func(ctx context.Context, storeKey string, resp []byte) error
	// floorRead reads the record the middleware stored under storeKey.
	floorRead func(ctx context.Context, storeKey string) error
	close     func()
	count     *counter // what the store's client sent; nil for memory
}

func (b *backend) sent() (trips, commands int64) { return b.count.sent() }

// response is the stored form the floors write: the same bytes a record
// holds, so that both sides move as much data.
var response = func() []byte {
	b, _ := json.Marshal(map[string]any{"status": 201, "header": map[string][]string{"Content-Type": {"application/json"}}, "body": `{"id":"ch_1"}`})
	return b
}()

// storeNames are the stores serverbench measures, in the order it names
// them.
var storeNames = []string{"memory", "redis", "rediscluster", "rediscluster+wait", "postgres", "mysql", "dynamodb"}

// where says where to find each store: redis is an address,
// rediscluster the seed addresses of a cluster (comma-separated),
// postgres and mysql DSNs. A child process of a fleet shares the stores its
// parent set up, and leaves them as they are when it ends.
type where struct {
	redis, cluster, postgres, mysql, dynamo string
	child                                   bool
}

func newBackend(ctx context.Context, name string, at where, conns int) (*backend, error) {
	switch name {
	case "memory":
		return memoryBackend()
	case "redis":
		return redisBackend(ctx, name, redis.NewClient(&redis.Options{Addr: at.redis, PoolSize: conns, MinIdleConns: conns / 2}), redisstore.Options{})
	case "rediscluster", "rediscluster+wait":
		if at.cluster == "" {
			return nil, errors.New("no cluster: name its nodes with -redis-cluster, or let serverbench start one with -redis-cluster own")
		}
		c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: strings.Split(at.cluster, ","), PoolSize: conns, MinIdleConns: conns / 2})
		var o redisstore.Options
		if name == "rediscluster+wait" {
			o.Replicas, o.ReplicaTimeout = 1, replicaWait
		}
		return redisBackend(ctx, name, c, o)
	case "postgres":
		return postgresBackend(ctx, at.postgres, conns, at.child)
	case "mysql":
		return mysqlBackend(ctx, at.mysql, conns, at.child)
	case "dynamodb":
		return dynamoBackend(ctx, at.dynamo, conns, at.child)
	}
	return nil, fmt.Errorf("unknown store %q (%s)", name, strings.Join(storeNames, ", "))
}

// replicaWait is how long rediscluster+wait's Complete waits for a
// replica.
const replicaWait = 100 * time.Millisecond

// memoryBackend: the floor is a map under a mutex, the least a process-
// local store can do.
func memoryBackend() (*backend, error) {
	s, err := idempotency.NewMemoryStore(0)
	if err != nil {
		return nil, err
	}
	var mu sync.Mutex
	m := map[string][]byte{}
	return &backend{
		name:  "memory",
		store: s,
		floorNew: func(_ context.Context, k string, resp []byte) error {
			mu.Lock()
			defer mu.Unlock()
			if _, ok := m[k]; ok {
				return errors.New("key taken")
			}
			m[k] = nil
			m[k] = resp
			return nil
		},
		floorRead: func(_ context.Context, k string) error {
			mu.Lock()
			defer mu.Unlock()
			if _, ok := m[k]; !ok {
				// The floor reads its own map: the middleware's records
				// live in the store. Seed on first sight.
				m[k] = response
			}
			return nil
		},
		close: func() {},
	}, nil
}

// redisBackend: the floor is SET NX PX then SET XX PX for a new key, GET
// for a replay.
func redisBackend(ctx context.Context, name string, c redis.UniversalClient, o redisstore.Options) (*backend, error) {
	count := &counter{}
	if cc, ok := c.(*redis.ClusterClient); ok {
		// Count at the nodes, where a redirect or a pipeline to one master
		// is a trip of its own.
		cc.OnNewNode(func(n *redis.Client) { n.AddHook(redisCounter{count}) })
	} else {
		c.AddHook(redisCounter{count})
	}
	if err := c.Ping(ctx).Err(); err != nil {
		c.Close()
		return nil, err
	}
	s, err := redisstore.New(c, o)
	if err != nil {
		c.Close()
		return nil, err
	}
	return &backend{
		name:  name,
		store: s,
		count: count,
		floorNew: func(ctx context.Context, k string, resp []byte) error {
			k = "serverbench:" + k
			ok, err := c.SetNX(ctx, k, "f|owner|fingerprint", idempotency.DefaultLockTimeout).Result()
			if err != nil {
				return err
			}
			if !ok {
				return errors.New("key taken")
			}
			return c.SetXX(ctx, k, resp, idempotency.DefaultRetention).Err()
		},
		floorRead: func(ctx context.Context, k string) error {
			return c.Get(ctx, redisstore.DefaultPrefix+k).Err()
		},
		close: func() { c.Close() },
	}, nil
}

// postgresBackend: the floor is a plain INSERT then a plain UPDATE of the
// same table the store uses, for a new key, and a SELECT by key for a
// replay.
func postgresBackend(ctx context.Context, dsn string, conns int, child bool) (*backend, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, err
	}
	count := &counter{}
	cfg.ConnConfig.Tracer = pgCounter{count}
	cfg.MaxConns = int32(conns)
	cfg.MinConns = int32(conns / 2)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	const table = "serverbench_idempotency"
	s, err := pgstore.New(pool, table)
	if err == nil && !child {
		err = s.Migrate(ctx)
		if err == nil {
			_, err = pool.Exec(ctx, "TRUNCATE "+table)
		}
	}
	if err != nil {
		pool.Close()
		return nil, err
	}
	return &backend{
		name:  "postgres",
		store: s,
		count: count,
		floorNew: func(ctx context.Context, k string, resp []byte) error {
			k = "floor:" + k
			if _, err := pool.Exec(ctx, `INSERT INTO `+table+` (key, fingerprint, owner, expires_at)
VALUES ($1, 'fingerprint', 'owner', now() + interval '10 seconds')`, k); err != nil {
				return err
			}
			_, err := pool.Exec(ctx, `UPDATE `+table+` SET done = true, status = 201, header = $2, body = $3,
	expires_at = now() + interval '1 day' WHERE key = $1`, k, `{"Content-Type":["application/json"]}`, resp)
			return err
		},
		floorRead: func(ctx context.Context, k string) error {
			var status *int32
			var header, body []byte
			return pool.QueryRow(ctx, `SELECT status, header, body FROM `+table+` WHERE key = $1`, k).Scan(&status, &header, &body)
		},
		close: func() {
			if !child {
				pool.Exec(context.Background(), "DROP TABLE IF EXISTS "+table)
			}
			pool.Close()
		},
	}, nil
}

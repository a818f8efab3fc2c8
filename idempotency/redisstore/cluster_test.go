package redisstore_test

import (
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/retryhttp/retryhttp/idempotency"
	"github.com/retryhttp/retryhttp/idempotency/redisstore"
	"github.com/retryhttp/retryhttp/idempotency/storetest"
	"github.com/retryhttp/retryhttp/shared/testenv"
)

// ownCluster is a Redis Cluster of the test's own: 3 masters and 3
// replicas, redis-servers on free loopback ports with a short
// cluster-node-timeout, so that a replica takes over a killed master
// within seconds. The servers are stopped by pid when the test ends.
type ownCluster struct {
	t     *testing.T
	nodes []*ownRedis
}

// clusterNodeTimeout is how long a master may be silent before its
// replica is promoted.
const clusterNodeTimeout = 1000 * time.Millisecond

func startCluster(t *testing.T, args ...string) (*redis.ClusterClient, *ownCluster) {
	t.Helper()
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		testenv.Unreachable(t, "redis-cli", "PATH", err)
	}
	c := &ownCluster{t: t}
	var addrs []string
	for range 6 {
		r := newOwnRedis(t, true, append([]string{"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
			"--cluster-node-timeout", strconv.Itoa(int(clusterNodeTimeout.Milliseconds()))}, args...)...)
		c.nodes = append(c.nodes, r)
		addrs = append(addrs, r.addr())
	}
	create := exec.Command(cli, append(append([]string{"--cluster", "create"}, addrs...), "--cluster-replicas", "1", "--cluster-yes")...)
	if out, err := create.CombinedOutput(); err != nil {
		t.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	client := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, MaxRedirects: 16})
	t.Cleanup(func() { client.Close() })
	c.waitOK(client)
	return client, c
}

// waitOK waits until every node reports cluster_state:ok and the client
// can write to every master.
func (c *ownCluster) waitOK(client *redis.ClusterClient) {
	c.t.Helper()
	ctx := context.Background()
	for deadline := time.Now().Add(30 * time.Second); ; {
		ok := true
		for _, r := range c.nodes {
			if r.cmd == nil {
				continue
			}
			one := redis.NewClient(&redis.Options{Addr: r.addr(), MaxRetries: -1})
			info, err := one.ClusterInfo(ctx).Result()
			one.Close()
			if err != nil || !strings.Contains(info, "cluster_state:ok") {
				ok = false
				break
			}
		}
		if ok {
			client.ReloadState(ctx)
			if err := client.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error { return m.Ping(ctx).Err() }); err == nil {
				return
			}
		}
		if time.Now().After(deadline) {
			c.t.Fatal("the cluster did not reach cluster_state:ok in 30 s")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// masterOf returns the node that is the master of key's slot now.
func (c *ownCluster) masterOf(client *redis.ClusterClient, key string) *ownRedis {
	c.t.Helper()
	ctx := context.Background()
	slot := int64(-1)
	if s, err := client.ClusterKeySlot(ctx, key).Result(); err == nil {
		slot = s
	} else {
		c.t.Fatal(err)
	}
	slots, err := client.ClusterSlots(ctx).Result()
	if err != nil {
		c.t.Fatal(err)
	}
	for _, s := range slots {
		if slot >= int64(s.Start) && slot <= int64(s.End) {
			for _, r := range c.nodes {
				if r.addr() == s.Nodes[0].Addr {
					return r
				}
			}
		}
	}
	c.t.Fatalf("no master for slot %d", slot)
	return nil
}

// The conformance suite on a real 6-node Redis Cluster: every record is
// one key, so its claim, its extensions and its completion go to one slot
// whatever the prefix.
func TestConformanceOnCluster(t *testing.T) {
	client, _ := startCluster(t)
	storetest.Run(t, func(t *testing.T) idempotency.Store {
		s, err := redisstore.New(client, redisstore.Options{Prefix: "retryhttp-test:" + uuid.NewString() + ":"})
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

// Options.Replicas: with a live replica every completion is acknowledged by
// it; with the replica gone, completions still succeed after the timeout
// and are counted as unreplicated.
func TestReplicas(t *testing.T) {
	master, replica := masterWithReplica(t)
	// A wait long enough for a loaded machine while the replica is up; a
	// short one while it sleeps.
	s, err := redisstore.New(master, redisstore.Options{Replicas: 1, ReplicaTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	short, err := redisstore.New(master, redisstore.Options{Replicas: 1, ReplicaTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	complete := func(s *redisstore.Store, key string) {
		t.Helper()
		if _, err := s.Claim(ctx, idempotency.ClaimParams{Key: key, Owner: "o", Fingerprint: "fp", Lock: time.Second}); err != nil {
			t.Fatal(err)
		}
		if err := s.Complete(ctx, idempotency.CompleteParams{Key: key, Owner: "o", Response: &idempotency.Response{Status: 201}, Retention: time.Minute}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 20 {
		complete(s, "replicated-"+strconv.Itoa(i))
	}
	if n := s.Unreplicated(); n != 0 {
		t.Fatalf("%d completions unreplicated with the replica up", n)
	}
	if v, err := replica.Get(ctx, redisstore.DefaultPrefix+"replicated-19").Result(); err != nil || !strings.HasPrefix(v, "e|") {
		t.Fatalf("the replica holds %q, %v; want the completed record", v, err)
	}
	asleep := make(chan error, 1)
	go func() { asleep <- replica.Do(ctx, "DEBUG", "SLEEP", "1").Err() }() // the replica stops answering for a second
	time.Sleep(100 * time.Millisecond)
	complete(short, "while-the-replica-sleeps")
	if err := <-asleep; err != nil {
		t.Fatal(err)
	}
	if n := short.Unreplicated(); n != 1 {
		t.Fatalf("%d completions unreplicated with the replica asleep, want 1", n)
	}

	if _, err := redisstore.New(master, redisstore.Options{Replicas: 0, ReplicaTimeout: time.Second}); err == nil {
		t.Fatal("Replicas 0 with a ReplicaTimeout was accepted")
	}
	if _, err := redisstore.New(master, redisstore.Options{Replicas: 1}); err == nil {
		t.Fatal("Replicas without a ReplicaTimeout was accepted")
	}
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": master.Options().Addr}})
	defer ring.Close()
	if _, err := redisstore.New(ring, redisstore.Options{Replicas: 1, ReplicaTimeout: time.Second}); err == nil {
		t.Fatal("Replicas on a Ring was accepted")
	}
}

// BenchmarkReplicas: a new key's claim and completion on a master
// with one replica (both the benchmark's own), without and with the wait.
func BenchmarkReplicas(b *testing.B) {
	for _, wait := range []bool{false, true} {
		b.Run(fmt.Sprintf("wait=%v", wait), func(b *testing.B) {
			master, _ := masterWithReplica(b)
			var o redisstore.Options
			if wait {
				o.Replicas, o.ReplicaTimeout = 1, time.Second
			}
			o.Prefix = "bench:" + uuid.NewString() + ":"
			s, err := redisstore.New(master, o)
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			resp := &idempotency.Response{Status: 201, Body: make([]byte, 1024)}
			for i := 0; b.Loop(); i++ {
				key := strconv.Itoa(i)
				if _, err := s.Claim(ctx, idempotency.ClaimParams{Key: key, Owner: "o", Fingerprint: "fp", Lock: time.Second}); err != nil {
					b.Fatal(err)
				}
				if err := s.Complete(ctx, idempotency.CompleteParams{Key: key, Owner: "o", Response: resp, Retention: time.Minute}); err != nil {
					b.Fatal(err)
				}
			}
			if s.Unreplicated() != 0 {
				b.Fatalf("%d unreplicated", s.Unreplicated())
			}
		})
	}
}

// masterWithReplica starts a redis-server of the test's own and a replica
// of it, and waits until the replica is in sync.
func masterWithReplica(t testing.TB) (master, replica *redis.Client) {
	t.Helper()
	master, m := startRedis(t, "--repl-diskless-sync-delay", "0")
	replica, _ = startRedis(t, "--replicaof", "127.0.0.1", strconv.Itoa(m.port), "--enable-debug-command", "yes")
	for deadline := time.Now().Add(10 * time.Second); ; {
		info, _ := replica.Info(context.Background(), "replication").Result()
		if strings.Contains(info, "master_link_status:up") {
			// and acknowledging: a write the replica confirms within a second
			ctx := context.Background()
			master.Set(ctx, "warm-up", "1", time.Minute)
			if n, err := master.Do(ctx, "WAIT", 1, 1000).Int(); err == nil && n == 1 {
				return master, replica
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("the replica did not connect")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

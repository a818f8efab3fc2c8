package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// ownCluster is a Redis Cluster serverbench starts for itself: 3 masters
// and 3 replicas, redis-servers in a temporary directory on free
// loopback ports, stopped by pid when the run ends.
type ownCluster struct {
	dir   string
	procs []*exec.Cmd
	addrs []string
}

func startCluster(ctx context.Context) (*ownCluster, error) {
	server, err := exec.LookPath("redis-server")
	if err == nil {
		_, err = exec.LookPath("redis-cli")
	}
	if err != nil {
		return nil, fmt.Errorf("starting a cluster: %w", err)
	}
	dir, err := os.MkdirTemp("", "serverbench-cluster-")
	if err != nil {
		return nil, err
	}
	c := &ownCluster{dir: dir}
	for i := range 6 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			c.stop()
			return nil, err
		}
		port := ln.Addr().(*net.TCPAddr).Port
		ln.Close()
		nd := filepath.Join(dir, strconv.Itoa(i))
		os.Mkdir(nd, 0o755)
		cmd := exec.Command(server, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", nd,
			"--save", "", "--appendonly", "no", "--maxmemory-policy", "noeviction",
			"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "2000")
		if err := cmd.Start(); err != nil {
			c.stop()
			return nil, err
		}
		c.procs = append(c.procs, cmd)
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		c.addrs = append(c.addrs, addr)
		if err := waitPing(ctx, addr); err != nil {
			c.stop()
			return nil, err
		}
	}
	create := exec.CommandContext(ctx, "redis-cli", append(append([]string{"--cluster", "create"}, c.addrs...), "--cluster-replicas", "1", "--cluster-yes")...)
	if out, err := create.CombinedOutput(); err != nil {
		c.stop()
		return nil, fmt.Errorf("redis-cli --cluster create: %v\n%s", err, out)
	}
	if err := c.waitOK(ctx); err != nil {
		c.stop()
		return nil, err
	}
	return c, nil
}

func waitPing(ctx context.Context, addr string) error {
	one := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer one.Close()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if one.Ping(ctx).Err() == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("redis-server on %s did not answer in 10 s", addr)
		}
	}
}

// waitOK waits until every node reports cluster_state:ok and every
// master has a replica in sync.
func (c *ownCluster) waitOK(ctx context.Context) error {
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		ok, replicas := true, 0
		for _, a := range c.addrs {
			one := redis.NewClient(&redis.Options{Addr: a, MaxRetries: -1})
			info, err := one.ClusterInfo(ctx).Result()
			repl, rerr := one.Info(ctx, "replication").Result()
			one.Close()
			if err != nil || rerr != nil || !strings.Contains(info, "cluster_state:ok") {
				ok = false
				break
			}
			if strings.Contains(repl, "master_link_status:up") {
				replicas++
			}
		}
		if ok && replicas == 3 {
			return nil
		}
		if time.Now().After(deadline) {
			return errors.New("the cluster did not reach cluster_state:ok with 3 replicas in sync in 30 s")
		}
	}
}

func (c *ownCluster) stop() {
	for _, p := range c.procs {
		p.Process.Kill()
		p.Wait()
	}
	os.RemoveAll(c.dir)
}

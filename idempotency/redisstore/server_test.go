package redisstore_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/retryhttp/retryhttp/shared/testenv"
)

// ownRedis is a redis-server of the test's own on a free loopback port,
// with a configuration that keeps nothing on disk unless args say so. It is
// stopped by pid when the test ends. The machine's shared Redis is never
// reconfigured, flushed or stopped.
type ownRedis struct {
	t    testing.TB
	port int
	dir  string
	args []string
	// cluster says the server also listens on port+10000, the cluster bus.
	cluster bool

	cmd    *exec.Cmd
	exited chan struct{} // closed when cmd has exited
	out    *lockedBuffer // what the server printed
}

// startRedis starts an ownRedis with args added to its configuration and
// returns a client of it.
func startRedis(t testing.TB, args ...string) (*redis.Client, *ownRedis) {
	t.Helper()
	r := newOwnRedis(t, false, args...)
	c := redis.NewClient(&redis.Options{Addr: r.addr(), MaxRetries: -1})
	t.Cleanup(func() { c.Close() })
	return c, r
}

// newOwnRedis starts a server and waits until it answers. A port another
// process took between the probe and the server's bind makes the server
// exit at once; it is then started again on another port, a few times.
func newOwnRedis(t testing.TB, cluster bool, args ...string) *ownRedis {
	t.Helper()
	r := &ownRedis{t: t, dir: t.TempDir(), args: args, cluster: cluster}
	t.Cleanup(r.kill)
	var last error
	for range 5 {
		r.port = freePort(t, cluster)
		r.start()
		if last = r.await(); last == nil {
			return r
		}
		r.kill()
	}
	t.Fatalf("own redis-server did not start: %v", last)
	return nil
}

// freePort returns a loopback port nothing listens on, and, for a cluster
// node, whose bus port (port+10000) is free too.
func freePort(t testing.TB, cluster bool) int {
	t.Helper()
	for range 100 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := ln.Addr().(*net.TCPAddr).Port
		ok := true
		if cluster {
			bus, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port+10000))
			if err == nil {
				bus.Close()
			}
			ok = err == nil
		}
		ln.Close()
		if ok {
			return port
		}
	}
	t.Fatal("no free loopback port with a free cluster bus port")
	return 0
}

func (r *ownRedis) addr() string { return "127.0.0.1:" + strconv.Itoa(r.port) }

func (r *ownRedis) start() {
	r.t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		testenv.Unreachable(r.t, "redis-server", "PATH", err)
	}
	base := []string{"--port", strconv.Itoa(r.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--dir", r.dir, "--logfile", ""}
	r.cmd = exec.Command(bin, append(base, r.args...)...)
	r.out = new(lockedBuffer)
	r.cmd.Stdout, r.cmd.Stderr = r.out, r.out
	if err := r.cmd.Start(); err != nil {
		r.t.Fatal(err)
	}
	exited, cmd := make(chan struct{}), r.cmd
	r.exited = exited
	go func() { cmd.Wait(); close(exited) }()
}

// kill stops the server with SIGKILL, as a crash would.
func (r *ownRedis) kill() {
	if r.cmd != nil {
		r.cmd.Process.Kill()
		<-r.exited
		r.cmd = nil
	}
}

// restart kills the server and starts it again on its port and directory.
func (r *ownRedis) restart() {
	r.t.Helper()
	r.kill()
	r.start()
	if err := r.await(); err != nil {
		r.t.Fatalf("own redis-server on port %d did not start again: %v", r.port, err)
	}
}

// await waits until the server answers PING. It gives up at once when the
// server exits, and after a minute, which only a machine that has stopped
// scheduling it would need.
func (r *ownRedis) await() error {
	c := redis.NewClient(&redis.Options{Addr: r.addr(), MaxRetries: -1})
	defer c.Close()
	deadline := time.Now().Add(time.Minute)
	for {
		err := c.Ping(context.Background()).Err()
		if err == nil {
			return nil
		}
		select {
		case <-r.exited:
			return fmt.Errorf("redis-server on port %d exited: %s", r.port, r.out.String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("redis-server on port %d did not answer in a minute: %v", r.port, err)
		}
	}
}

// lockedBuffer is a bytes.Buffer the server's output goroutine and the
// test may use at once.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

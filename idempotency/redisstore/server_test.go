package redisstore_test

import (
	"context"
	"net"
	"os/exec"
	"strconv"
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
	cmd  *exec.Cmd
}

// startRedis starts an ownRedis with args added to its configuration and
// returns a client of it.
func startRedis(t testing.TB, args ...string) (*redis.Client, *ownRedis) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &ownRedis{t: t, port: ln.Addr().(*net.TCPAddr).Port, dir: t.TempDir(), args: args}
	ln.Close()
	r.start()
	t.Cleanup(r.kill)
	c := redis.NewClient(&redis.Options{Addr: r.addr(), MaxRetries: -1})
	t.Cleanup(func() { c.Close() })
	r.wait(c)
	return c, r
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
	if err := r.cmd.Start(); err != nil {
		r.t.Fatal(err)
	}
}

// kill stops the server with SIGKILL, as a crash would.
func (r *ownRedis) kill() {
	if r.cmd != nil {
		r.cmd.Process.Kill()
		r.cmd.Wait()
		r.cmd = nil
	}
}

// restart kills the server and starts it again on its port and directory.
func (r *ownRedis) restart(c *redis.Client) {
	r.t.Helper()
	r.kill()
	r.start()
	r.wait(c)
}

func (r *ownRedis) wait(c *redis.Client) {
	r.t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; {
		err := c.Ping(context.Background()).Err()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("own redis-server on port %d did not start: %v", r.port, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

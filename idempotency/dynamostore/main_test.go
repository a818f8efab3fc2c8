package dynamostore_test

import (
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/retryhttp/retryhttp/shared/dynamotest"
)

// shared is one dynalite for the tests that do not stop it: each store
// has a table of its own. nil when it could not start; then each test
// starts its own (and is skipped, or failed under CI=true, as
// dynamotest.Start says).
var shared *dynamotest.Server

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "dynamostore-test")
	if err == nil {
		shared, _ = dynamotest.Launch(dir)
	}
	code := m.Run()
	if shared != nil {
		shared.Kill()
	}
	os.RemoveAll(dir)
	if code == 0 {
		if err := goleak.Find(); err != nil {
			os.Stderr.WriteString("goleak: " + err.Error() + "\n")
			code = 1
		}
	}
	os.Exit(code)
}

// server returns the shared dynalite, or one of the test's own.
func server(t *testing.T) *dynamotest.Server {
	if shared != nil {
		return shared
	}
	return dynamotest.Start(t)
}

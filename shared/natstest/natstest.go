// Package natstest connects the tests of several modules to the tests'
// NATS with JetStream.
package natstest

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/retryhttp/retryhttp/shared/testenv"
)

// JetStream connects to testenv.NATSURL, the connection closed when the
// test ends. A server that cannot be reached skips the test loudly, or
// fails it under CI=true (testenv.Unreachable).
func JetStream(t testing.TB) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect(testenv.NATSURL(), nats.Timeout(2*time.Second))
	if err != nil {
		testenv.Unreachable(t, "NATS", testenv.NATSURL(), err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

package redispacer_test

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

// A process of the fleet test (TestPacerFleetOnLoopback) is this test
// binary, started again with fleetEnv set: it runs its clients and exits.
func TestMain(m *testing.M) {
	if spec := os.Getenv(fleetEnv); spec != "" {
		os.Exit(fleetProcess(spec))
	}
	goleak.VerifyTestMain(m)
}

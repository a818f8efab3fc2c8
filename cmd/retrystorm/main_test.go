package main

import (
	"testing"

	"go.uber.org/goleak"
)

// The live runs start a server and hundreds of client goroutines: none may
// outlive a run.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

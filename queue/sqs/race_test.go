//go:build race

package sqs_test

// raceEnabled: the tests that run many processes for long skip under the
// race detector, which slows them without watching the processes they
// start; CI runs them in its per-module pass, without it.
const raceEnabled = true

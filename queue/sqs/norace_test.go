//go:build !race

package sqs_test

const raceEnabled = false

//go:build !race

package kafka_test

const raceEnabled = false

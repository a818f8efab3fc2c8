// Package testenv holds what the tests of several modules share about the
// services they need.
package testenv

import (
	"fmt"
	"os"
	"testing"
)

// Unreachable reports that a service a test needs cannot be reached: it
// skips the test with a message that cannot be missed, and fails it when
// CI=true, where the service is part of the contract.
func Unreachable(t testing.TB, service, addr string, err error) {
	t.Helper()
	msg := fmt.Sprintf("!!! %s at %s is unreachable (%v): the %s tests did NOT run", service, addr, err, service)
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

// RedisAddr is the Redis the tests use: RETRYHTTP_TEST_REDIS, default
// 127.0.0.1:6379.
func RedisAddr() string {
	if a := os.Getenv("RETRYHTTP_TEST_REDIS"); a != "" {
		return a
	}
	return "127.0.0.1:6379"
}

// PostgresDSN is the PostgreSQL the tests use: RETRYHTTP_TEST_POSTGRES,
// default the local server's test database.
func PostgresDSN() string {
	if d := os.Getenv("RETRYHTTP_TEST_POSTGRES"); d != "" {
		return d
	}
	return "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
}

// NATSURL is the NATS with JetStream the tests use: RETRYHTTP_TEST_NATS,
// default the local server.
func NATSURL() string {
	if u := os.Getenv("RETRYHTTP_TEST_NATS"); u != "" {
		return u
	}
	return "nats://127.0.0.1:4222"
}

// AMQPURL is the RabbitMQ the tests use: RETRYHTTP_TEST_AMQP, default the
// local server as guest.
func AMQPURL() string {
	if u := os.Getenv("RETRYHTTP_TEST_AMQP"); u != "" {
		return u
	}
	return "amqp://guest:guest@127.0.0.1:5672/"
}

// Package testenv holds what the tests of several modules share about the
// services they need, and reading back the metrics they count.
package testenv

import (
	"fmt"
	"os"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
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

// MySQLDSN is the MySQL or MariaDB the tests use, as a go-sql-driver/mysql
// DSN: RETRYHTTP_TEST_MYSQL, default the local server's test database as
// root.
func MySQLDSN() string {
	if d := os.Getenv("RETRYHTTP_TEST_MYSQL"); d != "" {
		return d
	}
	return "root@tcp(127.0.0.1:3306)/test"
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

// Sum is the sum over g's series named name whose labels include labels
// (nil: every series of the name): a counter's or a gauge's value, a
// histogram's count of observations. found is false when no series
// matched.
func Sum(t testing.TB, g prometheus.Gatherer, name string, labels map[string]string) (sum float64, found bool) {
	t.Helper()
	fams, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			have := map[string]string{}
			for _, l := range m.GetLabel() {
				have[l.GetName()] = l.GetValue()
			}
			if !contains(have, labels) {
				continue
			}
			found = true
			switch {
			case m.Counter != nil:
				sum += m.GetCounter().GetValue()
			case m.Gauge != nil:
				sum += m.GetGauge().GetValue()
			case m.Histogram != nil:
				sum += float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return sum, found
}

// contains reports whether have holds every label of want.
func contains(have, want map[string]string) bool {
	for k, v := range want {
		if have[k] != v {
			return false
		}
	}
	return true
}

// Package deploy holds the Prometheus rules and the Grafana dashboard for
// retryhttp's metrics (prometheus/, grafana/) and their tests: promtool's
// checks and unit tests of the alerts, run on Prometheus's own rule
// manager, and every expression evaluated with the PromQL engine against
// the metrics the library exports under faults.
package deploy

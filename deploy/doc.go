// Package deploy holds the Prometheus rules and the Grafana dashboard for
// retryhttp's metrics (prometheus/, grafana/) and their tests: promtool's
// unit tests of the alerts, and every expression evaluated with the PromQL
// engine against the metrics the library exports under faults.
package deploy

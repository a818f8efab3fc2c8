// Package shared holds what several of retryhttp's modules need, in their
// code or their tests, and no user calls: the test environment (the
// services' addresses, the loud skip, reading a metric back) in
// testenv, the tests' connections to PostgreSQL, MySQL and NATS in
// pgtest, mysqltest and natstest, the numbered schema steps the schema
// packages load in migrations, the TCP proxy of the fault tests in faultproxy, and
// the collector registration of the modules' metrics in promreg. It is
// a module of its own, as River's rivershared is, so that no module's
// code or tests reach into another module's internal packages, and the
// root module needs none of it. It makes no API promise: it changes with
// the modules that use it.
package shared

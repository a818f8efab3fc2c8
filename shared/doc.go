// Package shared holds what the tests of several of retryhttp's modules
// need and no user does: the test environment (the services' addresses,
// the loud skip, reading a metric back) in [testenv], and the TCP proxy of
// the fault tests in [faultproxy]. It is a module of its own, as River's
// rivershared is, so that no module's tests reach into another module's
// internal packages, and the root module's tests need none of it. It makes
// no API promise: it changes with the tests that use it.
package shared

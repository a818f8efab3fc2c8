//go:build !windows

package retryhttp

// On Unix the syscall constants are the errors the network returns.
var osConnRefused, osUnreachable, osConnBroken []error

package retryhttp

import "syscall"

// Windows reports socket errors as WSA codes, which syscall.ECONNRESET and
// friends (invented values on Windows) do not match.
var (
	osConnRefused = []error{syscall.Errno(10061)}                       // WSAECONNREFUSED
	osUnreachable = []error{syscall.Errno(10051), syscall.Errno(10065)} // WSAENETUNREACH, WSAEHOSTUNREACH
	osConnBroken  = []error{syscall.WSAECONNRESET, syscall.WSAECONNABORTED}
)

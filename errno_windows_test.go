package retryhttp

import (
	"net"
	"os"
	"syscall"
	"testing"
)

func TestWindowsSocketErrors(t *testing.T) {
	reset := &net.OpError{Op: "wsarecv", Net: "tcp", Err: os.NewSyscallError("wsarecv", syscall.WSAECONNRESET)}
	if ok, _, _ := transientError(reset); !ok {
		t.Error("WSAECONNRESET is not transient")
	}
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connectex", syscall.Errno(10061))}
	if ok, nothingSent, _ := transientError(refused); !ok || !nothingSent {
		t.Error("WSAECONNREFUSED is not a transient nothing-sent error")
	}
}

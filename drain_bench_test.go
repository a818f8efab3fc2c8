package retryhttp_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
)

// BenchmarkDiscardErrorBody measures the two ways to get rid of an error
// response's body before a retry, over loopback: read the rest so the
// connection is reused, or close it and pay a new connection on the next
// attempt (plain TCP, and TLS with a full handshake). It is what the drain
// bound is chosen from (see maxDrain).
func BenchmarkDiscardErrorBody(b *testing.B) {
	for _, size := range []int{4 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20} {
		body := bytes.Repeat([]byte("x"), size)
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusServiceUnavailable)
			w.Write(body)
		})
		for _, tls := range []bool{false, true} {
			srv := httptest.NewUnstartedServer(h)
			proto := "tcp"
			if tls {
				srv.StartTLS()
				proto = "tls"
			} else {
				srv.Start()
			}
			for _, drain := range []bool{true, false} {
				mode := "reconnect"
				if drain {
					mode = "drain"
				}
				b.Run(fmt.Sprintf("size=%dKiB/%s/%s", size>>10, proto, mode), func(b *testing.B) {
					base := srv.Client().Transport.(*http.Transport).Clone()
					defer base.CloseIdleConnections()
					req, _ := http.NewRequest("GET", srv.URL, nil)
					for b.Loop() {
						resp, err := base.RoundTrip(req)
						if err != nil {
							b.Fatal(err)
						}
						if drain {
							io.Copy(io.Discard, resp.Body)
						}
						resp.Body.Close()
					}
				})
			}
			srv.Close()
		}
	}
}

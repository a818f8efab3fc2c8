package retryhttp_test

import (
	"bufio"
	"context"
	"encoding/binary"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retryhttp/retryhttp"
)

// goAwayServer speaks just enough HTTP/2 (cleartext, prior knowledge) to
// answer each stream with 200, except on the first connection, where it
// answers the first request's HEADERS with a GOAWAY whose last stream ID
// is lastStream, error code code, and closes the connection.
type goAwayServer struct {
	ln         net.Listener
	lastStream func(stream uint32) uint32
	code       uint32
	conns      atomic.Int32
	answered   atomic.Int32 // streams answered 200
	wg         sync.WaitGroup
	mu         sync.Mutex
	open       []net.Conn
}

func startGoAwayServer(t *testing.T, code uint32, lastStream func(stream uint32) uint32) *goAwayServer {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	s := &goAwayServer{ln: ln, code: code, lastStream: lastStream}
	s.wg.Go(s.accept)
	t.Cleanup(func() {
		ln.Close()
		s.mu.Lock()
		for _, c := range s.open {
			c.Close()
		}
		s.mu.Unlock()
		s.wg.Wait()
	})
	return s
}

func (s *goAwayServer) accept() {
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		s.open = append(s.open, c)
		s.mu.Unlock()
		first := s.conns.Add(1) == 1
		s.wg.Go(func() { s.serve(c, first) })
	}
}

func writeFrame(w io.Writer, typ, flags byte, stream uint32, payload []byte) error {
	var h [9]byte
	h[0], h[1], h[2] = byte(len(payload)>>16), byte(len(payload)>>8), byte(len(payload))
	h[3], h[4] = typ, flags
	binary.BigEndian.PutUint32(h[5:], stream)
	_, err := w.Write(append(h[:], payload...))
	return err
}

// HTTP/2 frame types and flags (RFC 9113 §6).
const (
	frameHeaders  = 0x1
	frameSettings = 0x4
	frameGoAway   = 0x7
	flagEndStream = 0x1
	flagAck       = 0x1
	flagEndHeader = 0x4
	status200     = 0x88 // HPACK: indexed field 8, ":status: 200"
)

func (s *goAwayServer) serve(c net.Conn, goAway bool) {
	defer c.Close()
	r := bufio.NewReader(c)
	if _, err := io.ReadFull(r, make([]byte, len("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"))); err != nil {
		return
	}
	if writeFrame(c, frameSettings, 0, 0, nil) != nil {
		return
	}
	for {
		var h [9]byte
		if _, err := io.ReadFull(r, h[:]); err != nil {
			return
		}
		n := int(h[0])<<16 | int(h[1])<<8 | int(h[2])
		if _, err := io.ReadFull(r, make([]byte, n)); err != nil {
			return
		}
		stream := binary.BigEndian.Uint32(h[5:]) & 0x7fffffff
		switch {
		case h[3] == frameSettings && h[4]&flagAck == 0:
			writeFrame(c, frameSettings, flagAck, 0, nil)
		case h[3] == frameHeaders && goAway:
			p := binary.BigEndian.AppendUint32(nil, s.lastStream(stream))
			p = binary.BigEndian.AppendUint32(p, s.code)
			writeFrame(c, frameGoAway, 0, 0, p)
			return
		case h[3] == frameHeaders:
			s.answered.Add(1)
			writeFrame(c, frameHeaders, flagEndHeader|flagEndStream, stream, []byte{status200})
		}
	}
}

func h2cBase() *http.Transport {
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	return &http.Transport{Protocols: &p}
}

// A stream above a GOAWAY's last stream ID was not processed (RFC 9113
// §6.8): it is retried like a request that was never sent, POST included.
// A stream at or below it may have been processed: a POST without a key
// is not sent again.
func TestGoAway(t *testing.T) {
	below := func(stream uint32) uint32 { return stream - 1 }
	for _, tc := range []struct {
		name     string
		method   string
		last     func(uint32) uint32
		wantSent int32 // requests the server answered
		wantErr  bool
	}{
		{"GET above the last stream", "GET", below, 1, false},
		{"keyless POST above the last stream", "POST", below, 1, false},
		{"keyless POST the server may have processed", "POST", func(s uint32) uint32 { return s }, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := startGoAwayServer(t, 0x2 /* INTERNAL_ERROR */, tc.last)
			base := h2cBase()
			defer base.CloseIdleConnections()
			var attempts int
			tr := &retryhttp.Transport{Base: base, Policy: retryhttp.Policy{BaseDelay: 1}, Hooks: []retryhttp.Hook{retryhttp.HookFunc(func(_ context.Context, e retryhttp.Event) {
				if e.Kind == retryhttp.EventRetry || e.Kind == retryhttp.EventGiveUp {
					attempts = e.Attempt
				}
			})}}
			var body io.Reader
			if tc.method == "POST" {
				body = strings.NewReader(`{"amount":1}`)
			}
			req, _ := http.NewRequest(tc.method, "http://"+srv.ln.Addr().String()+"/charges", body)
			resp, err := tr.RoundTrip(req)
			if tc.wantErr {
				require.Error(t, err)
				assert.Equal(t, 0, attempts, "not retried")
			} else {
				require.NoError(t, err)
				resp.Body.Close()
				assert.Equal(t, 200, resp.StatusCode)
				assert.Equal(t, 1, attempts, "one retry after the GOAWAY")
			}
			assert.Equal(t, tc.wantSent, srv.answered.Load())
		})
	}
}

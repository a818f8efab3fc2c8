package bench

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retryhttp/retryhttp"
)

// memBase answers without touching the network: 200 and an empty body,
// after reading and discarding the request body as a server would.
type memBase struct{}

func (memBase) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		io.Copy(io.Discard, r.Body)
		r.Body.Close()
	}
	return &http.Response{StatusCode: 200, Header: http.Header{}, Body: http.NoBody, Request: r}, nil
}

// flakyBase answers 503 to every other request, then 200: one retry per
// logical request.
type flakyBase struct{ n atomic.Int64 }

func (f *flakyBase) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		io.Copy(io.Discard, r.Body)
		r.Body.Close()
	}
	code := 200
	if f.n.Add(1)%2 == 1 {
		code = 503
	}
	return &http.Response{StatusCode: code, Header: http.Header{}, Body: http.NoBody, Request: r}, nil
}

func drain(b *testing.B, resp *http.Response, err error) {
	if err != nil {
		b.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
}

func BenchmarkSuccessInMemory(b *testing.B) {
	for _, l := range Libs() {
		b.Run("lib="+l.Name, func(b *testing.B) {
			rt := l.Wrap(memBase{})
			req, _ := http.NewRequest("GET", "http://mem.test/", nil)
			b.ReportAllocs()
			for b.Loop() {
				resp, err := rt.RoundTrip(req)
				drain(b, resp, err)
			}
		})
	}
}

func BenchmarkSuccessLoopback(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	defer srv.Close()
	for _, l := range Libs() {
		b.Run("lib="+l.Name, func(b *testing.B) {
			base := srv.Client().Transport.(*http.Transport).Clone()
			defer base.CloseIdleConnections()
			rt := l.Wrap(base)
			req, _ := http.NewRequest("GET", srv.URL, nil)
			b.ReportAllocs()
			for b.Loop() {
				resp, err := rt.RoundTrip(req)
				drain(b, resp, err)
			}
		})
	}
}

var kib = bytes.Repeat([]byte("x"), 1024)

func BenchmarkPOST1KiB(b *testing.B) {
	for _, getBody := range []bool{true, false} {
		name := "GetBody"
		if !getBody {
			name = "noGetBody"
		}
		for _, l := range Libs() {
			b.Run("body="+name+"/lib="+l.Name, func(b *testing.B) {
				rt := l.Wrap(memBase{})
				b.ReportAllocs()
				for b.Loop() {
					req, _ := http.NewRequest("POST", "http://mem.test/", bytes.NewReader(kib))
					if !getBody {
						req.GetBody = nil
						req.Body = io.NopCloser(bytes.NewReader(kib))
					}
					resp, err := rt.RoundTrip(req)
					drain(b, resp, err)
				}
			})
		}
	}
}

// BenchmarkOneRetry: each request's first attempt fails and its retry
// succeeds, on a request with no deadline.
func BenchmarkOneRetry(b *testing.B) { oneRetry(b, context.Background()) }

// BenchmarkOneRetryDeadline is OneRetry on a request whose context has a
// deadline, as http.Client.Timeout gives it: the wait must also watch the
// context, so it needs a timer of its own.
func BenchmarkOneRetryDeadline(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	oneRetry(b, ctx)
}

// oneRetry measures each library on requests with ctx whose first
// attempt fails and whose retry succeeds.
func oneRetry(b *testing.B, ctx context.Context) {
	for _, l := range Libs() {
		if l.Name == "bare" {
			continue
		}
		l = unbudgeted(l)
		b.Run("lib="+l.Name, func(b *testing.B) {
			base := &flakyBase{}
			rt := l.Wrap(base)
			req, _ := http.NewRequestWithContext(ctx, "GET", "http://mem.test/", nil)
			b.ReportAllocs()
			for b.Loop() {
				resp, err := rt.RoundTrip(req)
				drain(b, resp, err)
				if resp.StatusCode != 200 {
					b.Fatalf("status %d", resp.StatusCode)
				}
			}
		})
	}
}

// BenchmarkParallel64 runs the success path from 64 goroutines.
func BenchmarkParallel64(b *testing.B) {
	for _, l := range Libs() {
		b.Run("lib="+l.Name, func(b *testing.B) {
			rt := l.Wrap(memBase{})
			b.SetParallelism(max(1, 64/runtime.GOMAXPROCS(0)))
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				req, _ := http.NewRequest("GET", "http://mem.test/", nil)
				for pb.Next() {
					resp, err := rt.RoundTrip(req)
					if err != nil {
						b.Error(err)
						return
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			})
		})
	}
}

// stragglerBase answers at once, but one attempt in 20 takes 2 ms (a slow
// replica, a GC pause), unless its context ends first.
type stragglerBase struct{ n atomic.Int64 }

func (s *stragglerBase) RoundTrip(r *http.Request) (*http.Response, error) {
	if s.n.Add(1)%20 == 0 {
		t := time.NewTimer(2 * time.Millisecond)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			return nil, r.Context().Err()
		}
	}
	return &http.Response{StatusCode: 200, Header: http.Header{}, Body: http.NoBody, Request: r}, nil
}

// BenchmarkHedged: GETs to a base with stragglers, one attempt in 20
// taking 2 ms; retryhttp+hedge sends a second attempt after 100 µs
// without an answer (Hedging, at most one hedge), which cuts the
// stragglers' wait. ns/op is the mean latency. Only retryhttp hedges, so
// the row compares it with itself and with bare.
func BenchmarkHedged(b *testing.B) {
	libs := []Lib{Libs()[0], Libs()[1], {"retryhttp+hedge", func(base http.RoundTripper) http.RoundTripper {
		return &retryhttp.Transport{Base: base, Policy: noWait, Logger: silent,
			Hedge: &retryhttp.Hedging{Delay: 100 * time.Microsecond, MaxHedges: 1}}
	}}}
	for _, l := range libs {
		b.Run("lib="+l.Name, func(b *testing.B) {
			rt := l.Wrap(&stragglerBase{})
			req, _ := http.NewRequest("GET", "http://mem.test/", nil)
			b.ReportAllocs()
			for b.Loop() {
				resp, err := rt.RoundTrip(req)
				drain(b, resp, err)
			}
		})
	}
}

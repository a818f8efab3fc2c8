package retryhttp_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/retryhttp/retryhttp"
)

// memBase answers 200 with an empty body without touching the network, to
// isolate the cost of the retry layer.
type memBase struct{}

var okResp = http.Response{StatusCode: 200, Header: http.Header{}, Body: http.NoBody}

func (memBase) RoundTrip(*http.Request) (*http.Response, error) {
	r := okResp
	return &r, nil
}

func benchRoundTrip(b *testing.B, rt http.RoundTripper, newReq func() *http.Request) {
	b.ReportAllocs()
	for b.Loop() {
		resp, err := rt.RoundTrip(newReq())
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
}

// BenchmarkSuccessInMemory compares the retry layer with its bare base on
// the success path: the extra ns/op and allocs/op are what it costs to
// leave it on.
func BenchmarkSuccessInMemory(b *testing.B) {
	req, _ := http.NewRequest("GET", "http://mem.test/", nil)
	post, _ := http.NewRequest("POST", "http://mem.test/", strings.NewReader("0123456789"))
	same := func(r *http.Request) func() *http.Request { return func() *http.Request { return r } }
	b.Run("GET/bare", func(b *testing.B) { benchRoundTrip(b, memBase{}, same(req)) })
	b.Run("GET/retryhttp", func(b *testing.B) { benchRoundTrip(b, &retryhttp.Transport{Base: memBase{}}, same(req)) })
	b.Run("POST-GetBody/bare", func(b *testing.B) { benchRoundTrip(b, memBase{}, same(post)) })
	b.Run("POST-GetBody/retryhttp", func(b *testing.B) { benchRoundTrip(b, &retryhttp.Transport{Base: memBase{}}, same(post)) })
	b.Run("POST-inject/retryhttp", func(b *testing.B) {
		benchRoundTrip(b, &retryhttp.Transport{Base: memBase{}, InjectIdempotencyKey: true}, same(post))
	})
}

// BenchmarkSuccessLoopback compares them over a real keep-alive HTTP/1.1
// connection, in the same run against the same server.
func BenchmarkSuccessLoopback(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ok")
	}))
	defer srv.Close()
	req, _ := http.NewRequest("GET", srv.URL, nil)
	same := func() *http.Request { return req }
	bare := srv.Client().Transport.(*http.Transport).Clone()
	defer bare.CloseIdleConnections()
	b.Run("bare", func(b *testing.B) { benchRoundTrip(b, bare, same) })
	wrapped := &retryhttp.Transport{Base: srv.Client().Transport.(*http.Transport).Clone()}
	defer wrapped.CloseIdleConnections()
	b.Run("retryhttp", func(b *testing.B) { benchRoundTrip(b, wrapped, same) })
}

// BenchmarkParallel64 runs the success path from 64 goroutines whatever
// -cpu says, with and without the budget (the only shared lock on the
// success path), the breaker and metrics. Compare with -cpu 1,2.
func BenchmarkParallel64(b *testing.B) {
	reg := prometheus.NewRegistry()
	m, err := retryhttp.NewMetrics(reg, retryhttp.MetricsOptions{})
	if err != nil {
		b.Fatal(err)
	}
	br, _ := retryhttp.NewBreaker(retryhttp.BreakerOptions{})
	ratio, _ := retryhttp.NewBreaker(retryhttp.BreakerOptions{FailureRatio: 0.1})
	cases := []struct {
		name string
		tr   http.RoundTripper
	}{
		{"bare", memBase{}},
		{"retryhttp-nobudget", &retryhttp.Transport{Base: memBase{}, Budget: retryhttp.NoBudget}},
		{"retryhttp-budget", &retryhttp.Transport{Base: memBase{}}},
		{"retryhttp-budget-breaker-metrics", &retryhttp.Transport{Base: memBase{}, Breaker: br, Hooks: []retryhttp.Hook{m}}},
		{"retryhttp-budget-ratiobreaker-metrics", &retryhttp.Transport{Base: memBase{}, Breaker: ratio, Hooks: []retryhttp.Hook{m}}},
		{"retryhttp-budget-ratiobreaker-throttle-metrics", &retryhttp.Transport{Base: memBase{}, Breaker: ratio, Throttle: &retryhttp.Throttle{}, Hooks: []retryhttp.Hook{m}}},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			b.SetParallelism(max(1, 64/runtime.GOMAXPROCS(0)))
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				req, _ := http.NewRequest("GET", "http://mem.test/", nil)
				for pb.Next() {
					resp, err := tc.tr.RoundTrip(req)
					if err != nil {
						b.Error(err)
						return
					}
					resp.Body.Close()
				}
			})
		})
	}
}

// BenchmarkMetricsOverhead compares the success path with metrics off and on.
func BenchmarkMetricsOverhead(b *testing.B) {
	m, err := retryhttp.NewMetrics(prometheus.NewRegistry(), retryhttp.MetricsOptions{})
	if err != nil {
		b.Fatal(err)
	}
	req, _ := http.NewRequest("GET", "http://mem.test/", nil)
	same := func() *http.Request { return req }
	b.Run("off", func(b *testing.B) { benchRoundTrip(b, &retryhttp.Transport{Base: memBase{}}, same) })
	b.Run("on", func(b *testing.B) {
		benchRoundTrip(b, &retryhttp.Transport{Base: memBase{}, Hooks: []retryhttp.Hook{m}}, same)
	})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	defer srv.Close()
	lreq, _ := http.NewRequest("GET", srv.URL, nil)
	lsame := func() *http.Request { return lreq }
	off := &retryhttp.Transport{Base: srv.Client().Transport.(*http.Transport).Clone()}
	on := &retryhttp.Transport{Base: srv.Client().Transport.(*http.Transport).Clone(), Hooks: []retryhttp.Hook{m}}
	defer off.CloseIdleConnections()
	defer on.CloseIdleConnections()
	b.Run("loopback-off", func(b *testing.B) { benchRoundTrip(b, off, lsame) })
	b.Run("loopback-on", func(b *testing.B) { benchRoundTrip(b, on, lsame) })
}

// BenchmarkBreakerManyHosts: requests to 20,000 hosts in turn through one
// Breaker, one host in a hundred always answering 503. fast-fails/op is the
// share of requests the breaker refused: with the failing hosts' circuits
// open it approaches 1% (their requests after the trip).
func BenchmarkBreakerManyHosts(b *testing.B) {
	const hosts = 20000
	reqs := make([]*http.Request, hosts)
	for i := range reqs {
		reqs[i], _ = http.NewRequest("GET", fmt.Sprintf("http://h%d.test/", i), nil)
	}
	base := roundTripper(func(r *http.Request) (*http.Response, error) {
		code := 200
		if strings.HasSuffix(r.URL.Hostname(), "00.test") {
			code = 503
		}
		return &http.Response{StatusCode: code, Header: http.Header{}, Body: http.NoBody}, nil
	})
	for _, maxHosts := range []int{1024, 32768} {
		b.Run(fmt.Sprintf("MaxHosts=%d", maxHosts), func(b *testing.B) {
			br, err := retryhttp.NewBreaker(retryhttp.BreakerOptions{MaxHosts: maxHosts})
			if err != nil {
				b.Fatal(err)
			}
			tr := &retryhttp.Transport{Base: base, Breaker: br, Policy: retryhttp.Policy{MaxAttempts: 1}}
			i, fast := 0, 0
			for b.Loop() {
				resp, err := tr.RoundTrip(reqs[i%hosts])
				i++
				if err != nil {
					fast++
					continue
				}
				resp.Body.Close()
			}
			b.ReportMetric(float64(fast)/float64(i), "fast-fails/op")
		})
	}
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

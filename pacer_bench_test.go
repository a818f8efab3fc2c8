package retryhttp

import (
	"context"
	"log/slog"
	"net/http"
	"net/url"
	"testing"

	"github.com/retryhttp/retryhttp/overload"
)

// quotaBase answers every request 200 with a quota that never binds,
// in GitHub's headers: every request to it is paced.
type quotaBase struct{ resp http.Response }

func (b *quotaBase) RoundTrip(r *http.Request) (*http.Response, error) {
	resp := b.resp
	resp.Request = r
	resp.Body = http.NoBody
	return &resp, nil
}

// BenchmarkPacedHost is a request's cost on a host that sends rate-limit
// headers, so that the Pacer takes a slot and reads each response: the
// requests critical, so that none is spread, and the quota never spent.
func BenchmarkPacedHost(b *testing.B) {
	base := &quotaBase{resp: http.Response{StatusCode: 200, Header: http.Header{
		"X-Ratelimit-Remaining": {"1000000000"}, "X-Ratelimit-Reset": {"3600"},
	}}}
	p := &Pacer{}
	u, _ := url.Parse("http://api.test/")
	p.host(u).seen.Store(true)
	tr := &Transport{Base: base, Pacer: p, Logger: slog.New(slog.DiscardHandler)}
	ctx := overload.WithPriority(context.Background(), overload.Critical)
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://api.test/items", nil)
	b.ReportAllocs()
	for b.Loop() {
		resp, err := tr.RoundTrip(req)
		if err != nil {
			b.Fatal(err)
		}
		resp.Body.Close()
	}
}

package idempotency

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"testing"
	"time"
)

// noopStore takes every claim and stores nothing: what is left of a
// request's cost is the middleware's own.
type noopStore struct{}

func (noopStore) Claim(context.Context, ClaimParams) (*Record, error) {
	return nil, nil
}
func (noopStore) Extend(context.Context, ExtendParams) error { return nil }
func (noopStore) Complete(context.Context, CompleteParams) error {
	return nil
}
func (noopStore) Release(context.Context, ReleaseParams) error { return nil }

// replayStore finds every key completed, with the response the handler
// below would give: what is left is the middleware's own cost of a replay.
type replayStore struct {
	noopStore
	rec *Record
}

func (s replayStore) Claim(context.Context, ClaimParams) (*Record, error) {
	return s.rec, nil
}

// sinkWriter is a ResponseWriter that keeps nothing, reused across
// requests, so the benchmark measures the handlers, not the recorder.
type sinkWriter struct{ h http.Header }

func (w *sinkWriter) Header() http.Header         { return w.h }
func (w *sinkWriter) Write(p []byte) (int, error) { return len(p), nil }
func (w *sinkWriter) WriteHeader(int)             {}

// BenchmarkMiddlewareOwnCost: a POST with a new key and a 100-byte JSON
// body through the middleware on a store that does nothing, against the
// same request to the bare handler: the difference is the middleware's own
// cost per new-key request. replay is the same request answered from a
// store that has its response; replay-cached, the same key again, answered
// by the replay cache (CacheEntries) without a store call.
func BenchmarkMiddlewareOwnCost(b *testing.B) {
	body := []byte(`{"amount":100,"currency":"eur","customer":"cus_8VHk2Lr","description":"order 1234","metadata":{"a":1}}`)
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, `{"id":"ch_1"}`)
	})
	m, err := New(Options{Store: noopStore{}})
	if err != nil {
		b.Fatal(err)
	}
	u, _ := url.Parse("http://api.test/v1/charges")
	sum, _ := m.fingerprint(&http.Request{Method: "POST", URL: u, Header: http.Header{"Content-Type": {"application/json"}}}, body)
	fp := hexSum(sum)
	replays, err := New(Options{Store: replayStore{rec: &Record{Fingerprint: fp, Response: &Response{
		Status: 201, Header: http.Header{"Content-Type": {"application/json"}}, Body: []byte(`{"id":"ch_1"}`)}}}})
	if err != nil {
		b.Fatal(err)
	}
	cached, err := New(Options{Store: replayStore{rec: &Record{Fingerprint: fp, Expires: time.Now().Add(time.Hour), Response: &Response{
		Status: 201, Header: http.Header{"Content-Type": {"application/json"}}, Body: []byte(`{"id":"ch_1"}`)}}}, CacheEntries: 16})
	if err != nil {
		b.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		h       http.Handler
		sameKey bool
	}{{"handler", handler, false}, {"middleware", m.Handler(handler), false}, {"replay", replays.Handler(handler), false},
		{"replay-cached", cached.Handler(handler), true}} {
		b.Run(tc.name, func(b *testing.B) {
			w := &sinkWriter{h: http.Header{}}
			req := &http.Request{Method: "POST", URL: u, Header: http.Header{
				"Content-Type": {"application/json"}, "Authorization": {"Bearer sk_test_123"}, "Idempotency-Key": {""},
			}, ContentLength: int64(len(body))}
			req = req.WithContext(context.Background())
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if !tc.sameKey {
					i++
				}
				req.Header["Idempotency-Key"][0] = "key-" + strconv.Itoa(i)
				req.Body = io.NopCloser(bytes.NewReader(body))
				clear(w.h)
				tc.h.ServeHTTP(w, req)
			}
		})
	}
}

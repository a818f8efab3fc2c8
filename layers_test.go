package retryhttp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retryhttp/retryhttp/internal/opkey"
)

// Keys derived from the operation are the same on every run of it,
// different for every call in it, and valid keys.
func TestDerivedKeys(t *testing.T) {
	run := func(id string, calls func(ctx context.Context, tr *Transport)) []string {
		base := script(status(201))
		tr := &Transport{Base: base, InjectIdempotencyKey: true}
		calls(opkey.With(context.Background(), &opkey.Op{ID: id}), tr)
		var keys []string
		for _, c := range base.seen() {
			keys = append(keys, c.header.Get("Idempotency-Key"))
		}
		return keys
	}
	post := func(ctx context.Context, tr *Transport, url string) {
		req, _ := http.NewRequestWithContext(ctx, "POST", url, strings.NewReader("x"))
		resp, err := tr.RoundTrip(req)
		require.NoError(t, err)
		resp.Body.Close()
	}
	calls := func(ctx context.Context, tr *Transport) {
		post(ctx, tr, "https://pay.test/v1/charges")
		post(ctx, tr, "https://pay.test/v1/charges")
		post(ctx, tr, "https://mail.test/send")
		post(WithCallLabel(ctx, "receipt"), tr, "https://mail.test/send")
	}
	first, again, other := run("op-1", calls), run("op-1", calls), run("op-2", calls)
	assert.Equal(t, first, again, "every run of an operation sends the same keys")
	// The derivation is part of the wire contract: two versions of the
	// library in one rolling deploy must derive the same keys. SHA-256 of
	// the parts, each followed by a zero byte, in hex.
	assert.Equal(t, "c4e39ffd981eca4d7e819de50a415c1a608af87b8ae1705d2ad0bb0e2407007e", first[0], "the first POST to pay.test/v1/charges of op-1")
	assert.Len(t, first, 4)
	seen := map[string]bool{}
	for i, k := range first {
		assert.Len(t, k, 64)
		assert.NotContains(t, k, "op-1", "the operation's key is not revealed")
		assert.False(t, seen[k], "call %d has its own key", i)
		seen[k] = true
		assert.NotEqual(t, k, other[i], "another operation, other keys")
	}
	labelled := run("op-1", func(ctx context.Context, tr *Transport) {
		post(WithCallLabel(ctx, "receipt"), tr, "https://mail.test/send")
	})
	assert.Equal(t, first[3], labelled[0], "a labelled call's key does not depend on the calls before it")
	assert.Equal(t, "385b40c5aba5a4d8691b0c60a4e6f0d6c79c6c57f55c176a43f5f53918a9cc86", labelled[0], "the first call labelled receipt in op-1: SHA-256 of \"retryhttp derived key v2 label\", \"op-1\", \"receipt\", \"1\", each followed by a zero byte")

	// WithOperationKey, for jobs and messages.
	a := run("", func(_ context.Context, tr *Transport) {
		post(WithOperationKey(context.Background(), "job-7"), tr, "https://pay.test/v1/charges")
	})
	b := run("", func(_ context.Context, tr *Transport) {
		post(WithOperationKey(context.Background(), "job-7"), tr, "https://pay.test/v1/charges")
	})
	assert.Equal(t, a, b)
	// Without an operation, every call gets a fresh random key.
	c := run("", func(_ context.Context, tr *Transport) { post(context.Background(), tr, "https://pay.test/v1/charges") })
	d := run("", func(_ context.Context, tr *Transport) { post(context.Background(), tr, "https://pay.test/v1/charges") })
	assert.NotEqual(t, c, d)
}

// A labelled call's key does not depend on the URL it is sent to, so two
// replicas that name the provider differently, or a URL changed between
// runs, derive one key; two calls under one label derive two.
func TestLabelledKeysIgnoreTheTarget(t *testing.T) {
	keys := func(urls ...string) []string {
		base := script(status(201))
		tr := &Transport{Base: base, InjectIdempotencyKey: true}
		ctx := WithCallLabel(WithOperationKey(context.Background(), "order-42"), "charge")
		for _, u := range urls {
			req, _ := http.NewRequestWithContext(ctx, "POST", u, strings.NewReader("x"))
			resp, err := tr.RoundTrip(req)
			require.NoError(t, err)
			resp.Body.Close()
		}
		var out []string
		for _, c := range base.seen() {
			out = append(out, c.header.Get("Idempotency-Key"))
		}
		return out
	}
	a := keys("http://127.0.0.1:8080/v1/charges", "http://127.0.0.1:8080/v1/charges")
	b := keys("http://localhost:8080/v1/charges", "https://eu.pay.test/v2/charges")
	require.Len(t, a, 2)
	assert.Equal(t, a, b, "replicas and URL changes agree")
	assert.NotEqual(t, a[0], a[1], "two calls under one label are two operations downstream")
}

// Two Transports on one path do not multiply: the one below retries,
// the one above returns what it gave up on.
func TestNestedTransportsRetryOnce(t *testing.T) {
	for _, tc := range []struct {
		name string
		step step
	}{{"503", status(503)}, {"reset", fail(errReset)}} {
		t.Run(tc.name, func(t *testing.T) {
			base := script(tc.step)
			inner := &Transport{Base: base, Policy: noWait, Budget: NoBudget}
			outer := &Transport{Base: inner, Policy: noWait, Budget: NoBudget}
			resp, err := outer.RoundTrip(newReq(t, "GET", "", nil))
			if err == nil {
				resp.Body.Close()
			}
			assert.Equal(t, 4, base.attempts(), "4 attempts, not 16")
		})
	}
	t.Run("through a layer that wraps the body", func(t *testing.T) {
		// The mark of a spent response is lost; the Transport above then
		// retries, and marks its retries, so the one below sends each once:
		// R + S − 1.
		base := script(status(503))
		inner := &Transport{Base: base, Policy: noWait, Budget: NoBudget}
		wrapping := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			resp, err := inner.RoundTrip(r)
			if err == nil {
				resp.Body = io.NopCloser(resp.Body)
			}
			return resp, err
		})
		outer := &Transport{Base: wrapping, Policy: noWait, Budget: NoBudget}
		resp, err := outer.RoundTrip(newReq(t, "GET", "", nil))
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, 4+4-1, base.attempts())
	})
}

// Two Transports that both retry: the one nearest the network retries under
// its Policy, the one above counts the stacking and warns once. One that
// sends once leaves the retrying to the one above, whose Policy applies.
func TestNestedTransportsAreDetected(t *testing.T) {
	t.Run("both retry", func(t *testing.T) {
		var logs bytes.Buffer
		reg := prometheus.NewRegistry()
		m, _ := NewMetrics(reg, MetricsOptions{})
		base := script(status(503))
		inner := &Transport{Base: base, Policy: noWait, Budget: NoBudget}
		outer := &Transport{Base: inner, Policy: noWait, Budget: NoBudget, Hooks: []Hook{m}, Logger: slog.New(slog.NewTextHandler(&logs, nil))}
		for range 2 {
			resp, err := outer.RoundTrip(newReq(t, "GET", "", nil))
			require.NoError(t, err)
			resp.Body.Close()
		}
		assert.Equal(t, 2*4, base.attempts(), "the inner Policy: 4 attempts a request")
		assert.Equal(t, 2.0, value(scrape(t, reg), "retryhttp_stacked_retries_total", "signal=retryhttp"))
		assert.Equal(t, 1, strings.Count(logs.String(), "two Transports on one path"), "one warning")
	})
	t.Run("the inner sends once", func(t *testing.T) {
		reg := prometheus.NewRegistry()
		m, _ := NewMetrics(reg, MetricsOptions{})
		base := script(status(503))
		inner := &Transport{Base: base, Policy: Policy{MaxAttempts: 1}, Budget: NoBudget, Hooks: []Hook{m}, Logger: slog.New(slog.DiscardHandler)}
		outer := &Transport{Base: inner, Policy: noWait, Budget: NoBudget, Hooks: []Hook{m}}
		resp, err := outer.RoundTrip(newReq(t, "GET", "", nil))
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, 4, base.attempts(), "the outer Policy applies")
		assert.Equal(t, -1.0, value(scrape(t, reg), "retryhttp_stacked_retries_total", "signal=retryhttp"), "one retry layer: nothing stacked")
	})
}

// A nil Logger means slog.Default(), as everywhere in the library.
func TestNilLoggerIsDefault(t *testing.T) {
	var logs bytes.Buffer
	old := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&logs, nil)))
	defer slog.SetDefault(old)
	resp, err := (&Transport{Base: script(status(503)), Policy: Policy{MaxAttempts: 2, BaseDelay: 1}}).RoundTrip(newReq(t, "GET", "", nil))
	require.NoError(t, err)
	resp.Body.Close()
	assert.Contains(t, logs.String(), "retryhttp: giving up", "the give-up's Warn record")
	assert.NotContains(t, logs.String(), "retryhttp: retrying", "retries are Debug records, below the default level")
}

// An SDK that retries on its own over a Transport: S upper attempts
// over R Transport attempts make R + S − 1 sends, not R × S.
func TestStackedSDKRetries(t *testing.T) {
	sdk := func(t *testing.T, tr *Transport, attempts int, mark func(h http.Header, attempt int)) {
		for a := 1; a <= attempts; a++ {
			req := newReq(t, "POST", "{}", nil)
			mark(req.Header, a)
			resp, err := tr.RoundTrip(req)
			if err == nil {
				resp.Body.Close()
			}
		}
	}
	for _, tc := range []struct {
		name   string
		signal stackedSignal
		fix    string // what the warning tells the user to set
		mark   func(h http.Header, attempt int)
	}{
		{"stripe-go: one key across its retries", stackedKey, "WithoutRetries", func(h http.Header, _ int) { h.Set("Idempotency-Key", "stripe-key") }},
		{"aws-sdk-go-v2: amz-sdk-request", stackedAWS, "aws.NopRetryer", func(h http.Header, a int) {
			h.Set("Idempotency-Key", fmt.Sprint("k", a))
			h.Set("Amz-Sdk-Request", fmt.Sprintf("attempt=%d; max=3", a))
		}},
		{"Stainless SDKs: X-Stainless-Retry-Count", stackedStainless, "option.WithMaxRetries(0)", func(h http.Header, a int) {
			h.Set("Idempotency-Key", fmt.Sprint("k", a))
			h.Set("X-Stainless-Retry-Count", fmt.Sprint(a-1))
		}},
		{"Google clients: gccl-attempt-count", stackedGoogle, "storage.RetryNever", func(h http.Header, a int) {
			h.Set("Idempotency-Key", fmt.Sprint("k", a))
			h.Set("X-Goog-Api-Client", fmt.Sprintf("gl-go/1.25 gccl-invocation-id/x gccl-attempt-count/%d", a))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var logs bytes.Buffer
				reg := prometheus.NewRegistry()
				m, _ := NewMetrics(reg, MetricsOptions{})
				base := script(status(503))
				tr := &Transport{Base: base, Budget: NoBudget, Hooks: []Hook{m}, Logger: slog.New(slog.NewTextHandler(&logs, nil))}
				sdk(t, tr, 3, tc.mark)
				assert.Equal(t, 4+3-1, base.attempts(), "R + S − 1")
				assert.Equal(t, 2.0, value(scrape(t, reg), "retryhttp_stacked_retries_total", "signal="+tc.signal.String()))
				var warnings []string
				for _, line := range strings.Split(logs.String(), "\n") {
					if strings.Contains(line, " signal=") {
						warnings = append(warnings, line)
					}
				}
				require.Len(t, warnings, 1, "one warning")
				assert.Contains(t, warnings[0], "signal="+tc.signal.String(), "naming the signal it saw")
				assert.Contains(t, warnings[0], tc.fix, "naming the fix")
				if tc.signal == stackedKey {
					// A repeated key proves no SDK: the application may have
					// sent it again itself.
					for _, sdk := range []string{"stripe", "aws", "OpenAI", "Google"} {
						assert.NotContains(t, warnings[0], sdk)
					}
				}
			})
		})
	}
}

// The window of remembered keys is bounded.
func TestRecentKeysBounded(t *testing.T) {
	var r recentKeys
	now := mono()
	for i := range 3 * recentKeysMax {
		r.repeat(fmt.Sprint("k", i), now, time.Minute)
	}
	assert.LessOrEqual(t, len(r.at), recentKeysMax)
	assert.True(t, r.repeat(fmt.Sprint("k", 3*recentKeysMax-1), now, time.Minute), "a recent key is remembered")
	assert.False(t, r.repeat("k0", now, time.Minute), "the oldest were forgotten")
	assert.False(t, r.repeat(fmt.Sprint("k", 3*recentKeysMax-2), now+2*time.Minute, time.Minute), "outside the window")
}

// A policy for one call, or none at all.
func TestPerRequestPolicy(t *testing.T) {
	base := script(status(503))
	tr := &Transport{Base: base, Policy: noWait, Budget: NoBudget}
	do := func(ctx context.Context) error {
		req := newReq(t, "GET", "", nil).WithContext(ctx)
		resp, err := tr.RoundTrip(req)
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	require.NoError(t, do(WithPolicy(context.Background(), Policy{MaxAttempts: 2, BaseDelay: time.Nanosecond})))
	assert.Equal(t, 2, base.attempts())
	require.NoError(t, do(WithoutRetries(context.Background())))
	assert.Equal(t, 3, base.attempts())
	require.NoError(t, do(context.Background()))
	assert.Equal(t, 7, base.attempts(), "the Transport's own policy otherwise")
	assert.ErrorIs(t, do(WithPolicy(context.Background(), Policy{MaxAttempts: -1})), ErrInvalidPolicy)
}

// The layers below see each attempt's number.
func TestAttemptFromContext(t *testing.T) {
	var seen []int
	n := 0
	base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		seen = append(seen, AttemptFromContext(r.Context()))
		n++
		code := 503
		if n == 3 {
			code = 200
		}
		return &http.Response{StatusCode: code, Body: http.NoBody, Header: http.Header{}}, nil
	})
	resp, err := (&Transport{Base: base, Policy: noWait}).RoundTrip(newReq(t, "GET", "", nil))
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, []int{1, 2, 3}, seen)
	assert.Equal(t, 1, AttemptFromContext(context.Background()))
}

// BenchmarkCallFromContext is what a RoundTrip pays to learn that no
// per-request policy was set: one context lookup, on a plain context and on
// a server request's (several values deep).
func BenchmarkCallFromContext(b *testing.B) {
	deep := context.Background()
	for i := range 6 {
		deep = context.WithValue(deep, struct{ n int }{i}, i)
	}
	for _, tc := range []struct {
		name string
		ctx  context.Context
	}{
		{"unused/background", context.Background()},
		{"unused/6-deep", deep},
		{"used", WithPolicy(deep, Policy{MaxAttempts: 2})},
	} {
		b.Run(tc.name, func(b *testing.B) {
			for b.Loop() {
				if c := callFrom(tc.ctx); c.attempt != 0 {
					b.Fatal(c)
				}
			}
		})
	}
}

// BeforeAttempt sees each attempt's own copy, may change its header (a
// fresh token per attempt), and may stop the call; the caller's request
// is never touched.
func TestBeforeAttempt(t *testing.T) {
	base := script(status(503), status(503), status(200))
	tr := &Transport{Base: base, Policy: noWait, Budget: NoBudget, BeforeAttempt: func(r *http.Request) error {
		r.Header.Set("Authorization", fmt.Sprint("Bearer token-", AttemptFromContext(r.Context())))
		return nil
	}}
	req := newReq(t, "GET", "", http.Header{"Authorization": {"Bearer stale"}})
	resp, err := tr.RoundTrip(req)
	require.NoError(t, err)
	resp.Body.Close()
	var auth []string
	for _, s := range base.seen() {
		auth = append(auth, s.header.Get("Authorization"))
	}
	assert.Equal(t, []string{"Bearer token-1", "Bearer token-2", "Bearer token-3"}, auth)
	assert.Equal(t, "Bearer stale", req.Header.Get("Authorization"), "the caller's request is not modified")
	assert.Same(t, req, resp.Request)

	errSigner := errors.New("signer: credentials expired")
	base = script(status(503), status(200))
	tr = &Transport{Base: base, Policy: noWait, Budget: NoBudget, BeforeAttempt: func(r *http.Request) error {
		if AttemptFromContext(r.Context()) == 2 {
			return errSigner
		}
		return nil
	}}
	_, err = tr.RoundTrip(newReq(t, "GET", "", nil))
	require.ErrorIs(t, err, errSigner)
	var re *RetryError
	require.ErrorAs(t, err, &re)
	assert.Equal(t, ReasonBeforeAttempt, re.Reason)
	assert.Equal(t, 1, re.Attempts)
	assert.Equal(t, 1, base.attempts(), "nothing more was sent")
	assert.True(t, base.closedBodies()[0], "the held response was closed")
}

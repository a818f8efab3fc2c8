package retryhttptest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestBadScripts(t *testing.T) {
	cases := []struct {
		name   string
		script Script
		want   string
	}{
		{"empty", Script{}, "empty script"},
		{"route without steps", Script{"/a": nil}, `route "/a" has no steps`},
		{"zero step", Script{"/a": {Status(200), {}}}, `route "/a" step 1: unknown step`},
		{"negative delay", Script{"/a": {Status(200).After(-time.Second)}}, "negative delay -1s"},
		{"status out of range", Script{"/a": {Status(42)}}, "status 42 is not in 100-599"},
		{"partial cut past the body", Script{"/a": {PartialBody(200, "abc", 3)}}, "cut at 3 must be within the 3-byte body"},
		{"partial cut negative", Script{"/a": {PartialBody(200, "abc", -1)}}, "cut at -1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, err := NewServer(tc.script, Options{})
			assert.Nil(t, s)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			assert.True(t, strings.HasPrefix(err.Error(), "retryhttptest: "))
		})
	}
}

// outcome is what a plain, non-retrying client observed.
type outcome struct {
	status  int
	body    string
	header  string // Retry-After
	err     bool   // RoundTrip failed
	bodyErr bool   // reading the body failed
	effects int
}

func TestSteps(t *testing.T) {
	cases := []struct {
		name string
		step Step
		want outcome
	}{
		{"status", Status(503), outcome{status: 503, body: "Service Unavailable"}},
		{"respond", Respond(201, http.Header{"X-Id": {"7"}}, "made"), outcome{status: 201, body: "made"}},
		{"retry-after seconds", RetryAfter(429, "5"), outcome{status: 429, body: "Too Many Requests", header: "5"}},
		{"retry-after date", RetryAfter(503, "Sun, 06 Nov 1994 08:49:37 GMT"), outcome{status: 503, body: "Service Unavailable", header: "Sun, 06 Nov 1994 08:49:37 GMT"}},
		{"forward", Forward(), outcome{status: 200, body: "ok", effects: 1}},
		{"reset", Reset(), outcome{err: true}},
		{"drop response", DropResponse(), outcome{err: true, effects: 1}},
		{"partial body", PartialBody(200, "0123456789", 4), outcome{status: 200, body: "0123", bodyErr: true}},
	}
	for _, h2 := range []bool{false, true} {
		for _, tc := range cases {
			t.Run(fmt.Sprintf("%s/h2=%v", tc.name, h2), func(t *testing.T) {
				srv := Start(t, Script{"/x": {tc.step}}, Options{HTTP2: h2})
				tr := srv.Transport()
				defer tr.(*http.Transport).CloseIdleConnections()
				req, _ := http.NewRequest("PUT", srv.URL+"/x", strings.NewReader("payload"))
				req.Header.Set("Idempotency-Key", "k1")
				resp, err := tr.RoundTrip(req)
				var got outcome
				if err != nil {
					got.err = true
					if !h2 && tc.step.kind != kindPartial {
						assert.True(t, errors.Is(err, syscall.ECONNRESET), "HTTP/1.1 reset is a TCP RST: %v", err)
					}
				} else {
					b, rerr := io.ReadAll(resp.Body)
					resp.Body.Close()
					got.status, got.body, got.bodyErr = resp.StatusCode, string(b), rerr != nil
					got.header = resp.Header.Get("Retry-After")
					if h2 {
						assert.Equal(t, 2, resp.ProtoMajor)
					}
				}
				got.effects = srv.Effects.Count("k1")
				assert.Equal(t, tc.want, got)

				reqs := srv.Requests()
				require.Len(t, reqs, 1)
				assert.Equal(t, "PUT", reqs[0].Method)
				assert.Equal(t, "/x", reqs[0].Path)
				assert.Equal(t, "payload", string(reqs[0].Body))
				assert.Equal(t, "k1", reqs[0].IdempotencyKey())
				assert.Equal(t, tc.step.String(), reqs[0].Did)
			})
		}
	}
}

func TestStepAfterDelaysAndGivesUpWithTheClient(t *testing.T) {
	srv := Start(t, Script{"/": {Status(200).After(60 * time.Millisecond), Status(200).After(time.Hour)}}, Options{})
	defer http.DefaultClient.CloseIdleConnections()
	start := time.Now()
	resp, err := http.Get(srv.URL)
	require.NoError(t, err)
	resp.Body.Close()
	assert.GreaterOrEqual(t, time.Since(start), 60*time.Millisecond)

	// A client that gives up ends the hour-long delay: Close, which waits
	// for every handler, returns at once.
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL, nil)
	_, err = http.DefaultClient.Do(req)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	closed := make(chan struct{})
	go func() { srv.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("the delayed handler outlived its client")
	}
}

func TestScriptOrderAndRoutes(t *testing.T) {
	srv := Start(t, Script{
		"/a": {Status(503), Status(200)},
		"*":  {Status(418)},
	}, Options{})
	get := func(path string) int {
		resp, err := http.Get(srv.URL + path)
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}
	defer http.DefaultClient.CloseIdleConnections()
	assert.Equal(t, []int{503, 200, 200, 418, 418}, []int{get("/a"), get("/a"), get("/a"), get("/b"), get("/c")})
	assert.Len(t, srv.RequestsTo("/a"), 3)
	assert.Equal(t, []int{0, 1, 2}, []int{srv.RequestsTo("/a")[0].Step, srv.RequestsTo("/a")[1].Step, srv.RequestsTo("/a")[2].Step})

	only := Start(t, Script{"/a": {Status(200)}}, Options{})
	resp, err := http.Get(only.URL + "/elsewhere")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, 404, resp.StatusCode)
}

// tbSpy records what an assertion reported instead of failing the test.
type tbSpy struct {
	testing.TB
	errors []string
}

func (s *tbSpy) Helper() {}
func (s *tbSpy) Errorf(format string, a ...any) {
	s.errors = append(s.errors, fmt.Sprintf(format, a...))
}

func at(ms int) time.Time { return time.Unix(0, 0).Add(time.Duration(ms) * time.Millisecond) }

func TestAssertions(t *testing.T) {
	key := func(k string) http.Header { return http.Header{"Idempotency-Key": {k}} }
	cases := []struct {
		name  string
		check func(tb testing.TB) bool
		fails string // "" when the property holds
	}{
		{"attempts hold", func(tb testing.TB) bool { return AssertAttempts(tb, make([]Request, 3), 3) }, ""},
		{"attempts differ", func(tb testing.TB) bool { return AssertAttempts(tb, make([]Request, 2), 3) }, "saw 2 attempts, want 3"},
		{"same key", func(tb testing.TB) bool {
			return AssertSameIdempotencyKey(tb, []Request{{Header: key("a")}, {Header: key("a")}})
		}, ""},
		{"key changes", func(tb testing.TB) bool {
			return AssertSameIdempotencyKey(tb, []Request{{Header: key("a")}, {Header: key("b")}})
		}, `attempt 2 carried Idempotency-Key "b"`},
		{"no key", func(tb testing.TB) bool { return AssertSameIdempotencyKey(tb, []Request{{Header: http.Header{}}}) }, "no Idempotency-Key"},
		{"waits within", func(tb testing.TB) bool {
			return AssertWaits(tb, []Request{{At: at(0)}, {At: at(100)}, {At: at(400)}}, Range{50 * time.Millisecond, 150 * time.Millisecond}, Range{200 * time.Millisecond, 400 * time.Millisecond})
		}, ""},
		{"wait too short", func(tb testing.TB) bool {
			return AssertWaits(tb, []Request{{At: at(0)}, {At: at(10)}}, Range{50 * time.Millisecond, 150 * time.Millisecond})
		}, "wait before attempt 2 was 10ms"},
		{"retry-after respected", func(tb testing.TB) bool {
			return AssertRetryAfterRespected(tb, []Request{{At: at(0), RetryAfter: "2"}, {At: at(2100)}})
		}, ""},
		{"retry-after ignored", func(tb testing.TB) bool {
			return AssertRetryAfterRespected(tb, []Request{{At: at(0), RetryAfter: "2"}, {At: at(1500)}})
		}, `came 1.5s after a Retry-After of "2"`},
		{"exactly once", func(tb testing.TB) bool {
			e := &Effects{}
			e.byKey = map[string]int{"a": 1, "b": 1}
			return e.AssertExactlyOnce(tb, 2)
		}, ""},
		{"twice", func(tb testing.TB) bool {
			e := &Effects{}
			e.byKey = map[string]int{"a": 2}
			return e.AssertExactlyOnce(tb, 1)
		}, `key "a": 2 side effects`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			spy := &tbSpy{}
			ok := tc.check(spy)
			if tc.fails == "" {
				assert.True(t, ok)
				assert.Empty(t, spy.errors)
				return
			}
			assert.False(t, ok)
			require.NotEmpty(t, spy.errors)
			assert.Contains(t, strings.Join(spy.errors, "\n"), tc.fails)
		})
	}
}

// Both key names are keys: the Transport and the middleware
// honour X-Idempotency-Key, so the kit counts effects under it too.
func TestXIdempotencyKeyIsAKey(t *testing.T) {
	srv := Start(t, Script{"/": {Forward()}}, Options{})
	req, _ := http.NewRequest("POST", srv.URL+"/", strings.NewReader("x"))
	req.Header.Set("X-Idempotency-Key", "xk")
	resp, err := srv.Transport().RoundTrip(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, 1, srv.Effects.Count("xk"))
	assert.Equal(t, "xk", srv.Requests()[0].IdempotencyKey())
	assert.True(t, AssertSameIdempotencyKey(t, srv.Requests()))
}

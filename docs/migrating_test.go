package docs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hashicorp/go-retryablehttp"

	"github.com/retryhttp/retryhttp"
)

// The rows of docs/MIGRATING.md's go-retryablehttp table ("move to the
// Transport"), each run in both forms against the same scripted server: a
// scripted RoundTripper in memory, under testing/synctest, so that both
// libraries' real default waits (1 s and up) take no time and are measured
// exactly.

// scripted answers request i with steps[i] (the last repeated): a status,
// 0 to fail as a connection closed before a response, or -1 to stall until
// the attempt's context ends. It records what
// it saw.
type scripted struct {
	mu     sync.Mutex
	steps  []int
	start  time.Time
	seen   []sawRequest
	closed []bool // per response handed out, whether its body was closed
}

// closes records the closing of response i's body.
type closes struct {
	io.Reader
	s *scripted
	i int
}

func (c closes) Close() error {
	c.s.mu.Lock()
	c.s.closed[c.i] = true
	c.s.mu.Unlock()
	return nil
}

// bodiesClosed reports, per response handed out, whether its body was
// closed.
func (s *scripted) bodiesClosed() []bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]bool(nil), s.closed...)
}

type sawRequest struct {
	at     time.Duration
	method string
	body   string
	header http.Header
}

func script(steps ...int) *scripted { return &scripted{steps: steps, start: time.Now()} }

func (s *scripted) RoundTrip(r *http.Request) (*http.Response, error) {
	var body string
	if r.Body != nil {
		b, _ := io.ReadAll(r.Body)
		r.Body.Close()
		body = string(b)
	}
	s.mu.Lock()
	s.seen = append(s.seen, sawRequest{at: time.Since(s.start), method: r.Method, body: body, header: r.Header.Clone()})
	code := s.steps[min(len(s.seen), len(s.steps))-1]
	n := len(s.seen)
	i := len(s.closed)
	if code > 0 {
		s.closed = append(s.closed, false)
	}
	s.mu.Unlock()
	switch code {
	case 0:
		return nil, io.ErrUnexpectedEOF
	case -1: // stalled until the attempt's context ends
		<-r.Context().Done()
		return nil, r.Context().Err()
	}
	return &http.Response{StatusCode: code, Status: fmt.Sprintf("%d %s", code, http.StatusText(code)), Header: http.Header{},
		Body: closes{strings.NewReader(fmt.Sprint("answer ", n)), s, i}, Request: r, ProtoMajor: 1}, nil
}

func (s *scripted) attempts() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.seen)
}

// waits are the times between the requests the server saw.
func (s *scripted) waits() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	var w []time.Duration
	for i := 1; i < len(s.seen); i++ {
		w = append(w, s.seen[i].at-s.seen[i-1].at)
	}
	return w
}

// got is what a caller got: a status, or an error.
func got(resp *http.Response, err error) string {
	if err != nil {
		return "error"
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return fmt.Sprint(resp.StatusCode)
}

// before is a go-retryablehttp client on s, silent, otherwise as
// NewClient makes it.
func before(s *scripted) *retryablehttp.Client {
	c := retryablehttp.NewClient()
	c.HTTPClient = &http.Client{Transport: s}
	c.Logger = nil
	return c
}

// after is an http.Client with a Transport on s, silent.
func after(s *scripted, tr *retryhttp.Transport) *http.Client {
	tr.Base = s
	if tr.Logger == nil {
		tr.Logger = silent
	}
	return &http.Client{Transport: tr}
}

var silent = retryhttpSilent()

func get(t *testing.T, c *http.Client, ctx context.Context) (*http.Response, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, "GET", "http://api.test/x", nil)
	if err != nil {
		t.Fatal(err)
	}
	return c.Do(req)
}

// rows maps the first cell of each row to its test.
var rows = map[string]func(t *testing.T){
	"`NewClient()`": func(t *testing.T) {
		b, a := script(503, 503, 200), script(503, 503, 200)
		r1, e1 := before(b).Get("http://api.test/x")
		r2, e2 := get(t, after(a, &retryhttp.Transport{}), context.Background())
		same(t, "both retry two 503s and return the 200", got(r1, e1), got(r2, e2), "200")
		same(t, "attempts", b.attempts(), a.attempts(), 3)
		for _, w := range a.waits() {
			if w > 10*time.Second {
				t.Errorf("a wait of %v past MaxDelay", w)
			}
		}
	},
	"`RetryMax`": func(t *testing.T) {
		b, a := script(503), script(503)
		c := before(b)
		c.RetryMax, c.RetryWaitMin, c.RetryWaitMax = 3, time.Millisecond, time.Millisecond
		c.ErrorHandler = retryablehttp.PassthroughErrorHandler
		got(c.Get("http://api.test/x"))
		got(get(t, after(a, &retryhttp.Transport{Policy: retryhttp.Policy{MaxAttempts: 4, BaseDelay: time.Millisecond}}), context.Background()))
		same(t, "RetryMax 3 and MaxAttempts 4 send four times", b.attempts(), a.attempts(), 4)
	},
	"`RetryWaitMin`": func(t *testing.T) {
		b, a := script(503, 200), script(503, 200)
		c := before(b)
		c.RetryWaitMin = 500 * time.Millisecond
		got(c.Get("http://api.test/x"))
		got(get(t, after(a, &retryhttp.Transport{Policy: retryhttp.Policy{BaseDelay: 500 * time.Millisecond, Jitter: retryhttp.JitterNone}}), context.Background()))
		same(t, "the first wait", b.waits()[0], a.waits()[0], 500*time.Millisecond)
	},
	"`RetryWaitMax`": func(t *testing.T) {
		b, a := script(503, 503, 503, 200), script(503, 503, 503, 200)
		c := before(b)
		c.RetryWaitMin, c.RetryWaitMax = time.Second, 3*time.Second
		got(c.Get("http://api.test/x"))
		got(get(t, after(a, &retryhttp.Transport{Policy: retryhttp.Policy{BaseDelay: time.Second, MaxDelay: 3 * time.Second, Jitter: retryhttp.JitterNone}}), context.Background()))
		same(t, "waits capped at the max", fmt.Sprint(b.waits()), fmt.Sprint(a.waits()), "[1s 2s 3s]")
	},
	"`Backoff: DefaultBackoff`": func(t *testing.T) {
		b, a := script(503, 503, 503, 200), script(503, 503, 503, 200)
		c := before(b)
		c.Backoff = retryablehttp.DefaultBackoff
		got(c.Get("http://api.test/x"))
		got(get(t, after(a, &retryhttp.Transport{Policy: retryhttp.Policy{BaseDelay: time.Second, MaxDelay: 30 * time.Second, Jitter: retryhttp.JitterNone}}), context.Background()))
		same(t, "min·2ⁿ", fmt.Sprint(b.waits()), fmt.Sprint(a.waits()), "[1s 2s 4s]")
	},
	"`Backoff: LinearJitterBackoff`": func(t *testing.T) {
		b, a := script(503, 503, 503, 200), script(503, 503, 503, 200)
		c := before(b)
		c.Backoff, c.RetryWaitMin, c.RetryWaitMax = retryablehttp.LinearJitterBackoff, time.Second, time.Second
		got(c.Get("http://api.test/x"))
		linear := func(_ *http.Request, n int, _ *http.Response) time.Duration { return time.Duration(n) * time.Second }
		got(get(t, after(a, &retryhttp.Transport{Backoff: linear}), context.Background()))
		same(t, "linear waits", fmt.Sprint(b.waits()), fmt.Sprint(a.waits()), "[1s 2s 3s]")
	},
	"`Backoff: yourFunc`": func(t *testing.T) {
		b, a := script(429, 503, 503, 200), script(429, 503, 503, 200)
		// An SDK's own shape: 100 ms·2ⁿ after a 429, 0.8 s·n after a 5xx.
		theirs := func(_, _ time.Duration, n int, resp *http.Response) time.Duration {
			if resp != nil && resp.StatusCode == 429 {
				return 100 * time.Millisecond << n
			}
			return time.Duration(n) * 800 * time.Millisecond
		}
		c := before(b)
		c.Backoff = theirs
		got(c.Get("http://api.test/x"))
		ours := func(_ *http.Request, n int, resp *http.Response) time.Duration { return theirs(0, 0, n-1, resp) }
		got(get(t, after(a, &retryhttp.Transport{Backoff: ours}), context.Background()))
		same(t, "the function's waits", fmt.Sprint(b.waits()), fmt.Sprint(a.waits()), "[100ms 800ms 1.6s]")
	},
	"`CheckRetry: yourFunc`": func(t *testing.T) {
		refused := errors.New("refused")
		check := func(_ context.Context, resp *http.Response, err error) (bool, error) {
			if resp != nil && resp.StatusCode == 418 {
				return false, refused
			}
			return resp != nil && resp.StatusCode == 500, nil
		}
		b, a := script(500, 418), script(500, 418)
		c := before(b)
		c.CheckRetry, c.RetryWaitMin, c.RetryWaitMax = check, time.Millisecond, time.Millisecond
		_, e1 := c.Get("http://api.test/x")
		_, e2 := get(t, after(a, &retryhttp.Transport{ShouldRetry: retryhttp.FromCheckRetry(check), Policy: retryhttp.Policy{BaseDelay: time.Millisecond}}), context.Background())
		same(t, "a 500 retried, then the 418's error", b.attempts(), a.attempts(), 2)
		if !errors.Is(e1, refused) || !errors.Is(e2, refused) {
			t.Errorf("errors %v and %v; want both to be CheckRetry's", e1, e2)
		}
	},
	"`CheckRetry: DefaultRetryPolicy`": func(t *testing.T) {
		b, a, d := script(500, 200), script(500, 200), script(500, 200)
		c := before(b)
		c.RetryWaitMin = time.Millisecond
		got(c.Get("http://api.test/x"))
		got(get(t, after(a, &retryhttp.Transport{ShouldRetry: retryhttp.FromCheckRetry(retryablehttp.DefaultRetryPolicy), Policy: retryhttp.Policy{BaseDelay: time.Millisecond}}), context.Background()))
		got(get(t, after(d, &retryhttp.Transport{}), context.Background()))
		same(t, "the adapter retries a 500", b.attempts(), a.attempts(), 2)
		same(t, "the defaults do not", d.attempts(), 1, 1)
	},
	"`CheckRetry: ErrorPropagatedRetryPolicy`": func(t *testing.T) {
		b, a := script(503), script(503)
		c := before(b)
		c.CheckRetry, c.RetryWaitMin, c.RetryWaitMax = retryablehttp.ErrorPropagatedRetryPolicy, time.Millisecond, time.Millisecond
		_, e1 := c.Get("http://api.test/x")
		_, e2 := get(t, after(a, &retryhttp.Transport{ShouldRetry: retryhttp.FromCheckRetry(retryablehttp.ErrorPropagatedRetryPolicy), Policy: retryhttp.Policy{MaxAttempts: 5, BaseDelay: time.Millisecond}}), context.Background())
		same(t, "attempts", b.attempts(), a.attempts(), 5)
		const text = "unexpected HTTP status 503 Service Unavailable"
		if e1 == nil || e2 == nil || !strings.Contains(e1.Error(), text) || !strings.Contains(e2.Error(), text) {
			t.Errorf("errors %v and %v; want both to say %q", e1, e2, text)
		}
	},
	"`ErrorHandler`": func(t *testing.T) {
		b, a := script(503), script(503)
		c := before(b)
		c.RetryWaitMin, c.RetryWaitMax = time.Millisecond, time.Millisecond
		r1, e1 := c.Get("http://api.test/x")
		r2, e2 := get(t, after(a, &retryhttp.Transport{Policy: retryhttp.Policy{MaxAttempts: 5, BaseDelay: time.Millisecond}}), context.Background())
		same(t, "without a handler go-retryablehttp gives an error, the Transport the last response", got(r1, e1)+" "+got(r2, e2), "error 503", "error 503")
	},
	"`ErrorHandler: PassthroughErrorHandler`": func(t *testing.T) {
		b, a := script(503), script(503)
		c := before(b)
		c.RetryWaitMin, c.RetryWaitMax, c.ErrorHandler = time.Millisecond, time.Millisecond, retryablehttp.PassthroughErrorHandler
		r1, e1 := c.Get("http://api.test/x")
		r2, e2 := get(t, after(a, &retryhttp.Transport{Policy: retryhttp.Policy{MaxAttempts: 5, BaseDelay: time.Millisecond}}), context.Background())
		same(t, "the last response", got(r1, e1), got(r2, e2), "503")
	},
	"`RequestLogHook`": func(t *testing.T) {
		b, a := script(503, 200), script(503, 200)
		var theirs, ours []int
		c := before(b)
		c.RetryWaitMin = time.Millisecond
		c.RequestLogHook = func(_ retryablehttp.Logger, _ *http.Request, i int) { theirs = append(theirs, i+1) }
		got(c.Get("http://api.test/x"))
		got(get(t, after(a, &retryhttp.Transport{Policy: retryhttp.Policy{BaseDelay: time.Millisecond},
			BeforeAttempt: func(r *http.Request) error {
				ours = append(ours, retryhttp.AttemptFromContext(r.Context()))
				return nil
			}}), context.Background()))
		same(t, "called before every attempt", fmt.Sprint(theirs), fmt.Sprint(ours), "[1 2]")
	},
	"`ResponseLogHook`": func(t *testing.T) {
		b, a := script(503, 200), script(503, 200)
		var theirs, ours []int
		c := before(b)
		c.RetryWaitMin = time.Millisecond
		c.ResponseLogHook = func(_ retryablehttp.Logger, resp *http.Response) { theirs = append(theirs, resp.StatusCode) }
		got(c.Get("http://api.test/x"))
		hook := retryhttp.HookFunc(func(_ context.Context, e retryhttp.Event) {
			if (e.Kind == retryhttp.EventRetry || e.Kind == retryhttp.EventDone) && e.Response != nil {
				ours = append(ours, e.Response.StatusCode)
			}
		})
		got(get(t, after(a, &retryhttp.Transport{Policy: retryhttp.Policy{BaseDelay: time.Millisecond}, Hooks: []retryhttp.Hook{hook}}), context.Background()))
		same(t, "every response", fmt.Sprint(theirs), fmt.Sprint(ours), "[503 200]")
	},
	"`PrepareRetry` (re-sign)": func(t *testing.T) {
		b, a := script(503, 200), script(503, 200)
		c := before(b)
		c.RetryWaitMin = time.Millisecond
		c.PrepareRetry = func(r *http.Request) error { r.Header.Set("Signature", "again"); return nil }
		got(c.Get("http://api.test/x"))
		got(get(t, after(a, &retryhttp.Transport{Policy: retryhttp.Policy{BaseDelay: time.Millisecond}, BeforeAttempt: func(r *http.Request) error {
			if retryhttp.AttemptFromContext(r.Context()) > 1 {
				r.Header.Set("Signature", "again")
			}
			return nil
		}}), context.Background()))
		same(t, "the retry re-signed", b.seen[1].header.Get("Signature"), a.seen[1].header.Get("Signature"), "again")
	},
	"`Logger`": func(t *testing.T) {
		b, a := script(503, 200), script(503, 200)
		var theirs, ours bytes.Buffer
		c := before(b)
		c.RetryWaitMin, c.Logger = time.Millisecond, printfTo{&theirs}
		got(c.Get("http://api.test/x"))
		got(get(t, after(a, &retryhttp.Transport{Policy: retryhttp.Policy{BaseDelay: time.Millisecond}, Logger: slogTo(&ours)}), context.Background()))
		if !strings.Contains(theirs.String(), "retrying") || !strings.Contains(ours.String(), "retrying") {
			t.Errorf("logs %q and %q; want a retry in each", theirs.String(), ours.String())
		}
	},
	"`HTTPClient`": func(t *testing.T) {
		// Each attempt through the existing client's transport, bounded
		// by its Timeout: the stalled first attempt is cut and retried.
		b, a := script(-1, 200), script(-1, 200)
		c := before(b)
		c.RetryWaitMin = time.Millisecond
		c.HTTPClient = &http.Client{Transport: b, Timeout: time.Second}
		r1 := got(c.Get("http://api.test/x"))
		existing := &http.Client{Transport: a, Timeout: time.Second}
		tr := &retryhttp.Transport{Policy: retryhttp.Policy{BaseDelay: time.Millisecond, ExchangeTimeout: existing.Timeout}}
		r2 := got(get(t, after(existing.Transport.(*scripted), tr), context.Background()))
		same(t, "the stalled attempt cut by the timeout and retried", b.attempts(), a.attempts(), 2)
		same(t, "then answered", r1, r2, "200")
	},
	"`NewRequest(method, url, body)`": func(t *testing.T) {
		b, a := script(503, 201), script(503, 201)
		c := before(b)
		c.RetryWaitMin = time.Millisecond
		r1, _ := retryablehttp.NewRequest("PUT", "http://api.test/x", []byte("payload"))
		got(c.Do(r1))
		r2, _ := http.NewRequest("PUT", "http://api.test/x", bytes.NewReader([]byte("payload")))
		got(after(a, &retryhttp.Transport{Policy: retryhttp.Policy{BaseDelay: time.Millisecond}}).Do(r2))
		same(t, "the body on every attempt", b.seen[1].body, a.seen[1].body, "payload")
	},
	"`NewRequestWithContext`": func(t *testing.T) {
		b, a := script(503), script(503)
		c := before(b)
		c.RetryWaitMin, c.RetryWaitMax = time.Second, time.Second
		ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
		defer cancel()
		r1, _ := retryablehttp.NewRequestWithContext(ctx, "GET", "http://api.test/x", nil)
		_, e1 := c.Do(r1)
		ctx, cancel = context.WithTimeout(context.Background(), 1500*time.Millisecond)
		defer cancel()
		r2, _ := http.NewRequestWithContext(ctx, "GET", "http://api.test/x", nil)
		r, e2 := after(a, &retryhttp.Transport{Policy: retryhttp.Policy{BaseDelay: time.Second, Jitter: retryhttp.JitterNone}}).Do(r2)
		same(t, "the context bounds the retries", b.attempts(), a.attempts(), 2)
		same(t, "go-retryablehttp ends with the context's error; the Transport with the last 503, before the wait it cannot finish",
			fmt.Sprint(errors.Is(e1, context.DeadlineExceeded), " ", got(r, e2)), "true 503", "true 503")
	},
	"`FromRequest(req)`": func(t *testing.T) {
		b, a := script(503, 200), script(503, 200)
		c := before(b)
		c.RetryWaitMin = time.Millisecond
		hr, _ := http.NewRequest("PUT", "http://api.test/x", strings.NewReader("from"))
		r1, _ := retryablehttp.FromRequest(hr)
		got(c.Do(r1))
		hr2, _ := http.NewRequest("PUT", "http://api.test/x", strings.NewReader("from"))
		got(after(a, &retryhttp.Transport{Policy: retryhttp.Policy{BaseDelay: time.Millisecond}}).Do(hr2))
		same(t, "the request as it is, retried", b.seen[1].body, a.seen[1].body, "from")
	},
	"`Request.SetBody(b)`": func(t *testing.T) {
		b, a := script(503, 200), script(503, 200)
		c := before(b)
		c.RetryWaitMin = time.Millisecond
		r1, _ := retryablehttp.NewRequest("PUT", "http://api.test/x", []byte("old"))
		r1.SetBody([]byte("new"))
		got(c.Do(r1))
		r2, _ := http.NewRequest("PUT", "http://api.test/x", strings.NewReader("new"))
		got(after(a, &retryhttp.Transport{Policy: retryhttp.Policy{BaseDelay: time.Millisecond}}).Do(r2))
		same(t, "the new body, twice", b.seen[1].body+b.seen[0].body, a.seen[1].body+a.seen[0].body, "newnew")
	},
	"`ReaderFunc` (a stream body)": func(t *testing.T) {
		b, a := script(503, 200), script(503, 200)
		c := before(b)
		c.RetryWaitMin = time.Millisecond
		r1, _ := retryablehttp.NewRequest("PUT", "http://api.test/x", retryablehttp.ReaderFunc(func() (io.Reader, error) {
			return io.MultiReader(strings.NewReader("stream")), nil
		}))
		got(c.Do(r1))
		r2, _ := http.NewRequest("PUT", "http://api.test/x", io.MultiReader(strings.NewReader("stream")))
		got(after(a, &retryhttp.Transport{Policy: retryhttp.Policy{BaseDelay: time.Millisecond, BufferStreams: true}}).Do(r2))
		same(t, "a stream, retried whole", b.seen[1].body, a.seen[1].body, "stream")
	},
	"`Request.BodyBytes`, `WriteTo`": func(t *testing.T) {
		r1, _ := retryablehttp.NewRequest("PUT", "http://api.test/x", []byte("bytes"))
		b1, _ := r1.BodyBytes()
		r2, _ := http.NewRequest("PUT", "http://api.test/x", strings.NewReader("bytes"))
		rc, _ := r2.GetBody()
		b2, _ := io.ReadAll(rc)
		same(t, "the body, left to be sent", string(b1), string(b2), "bytes")
	},
	"`Request.SetResponseHandler`": func(t *testing.T) {
		b, a := script(200, 200), script(200, 200)
		c := before(b)
		c.RetryWaitMin = time.Millisecond
		calls := 0
		r1, _ := retryablehttp.NewRequest("GET", "http://api.test/x", nil)
		r1.SetResponseHandler(func(*http.Response) error {
			if calls++; calls == 1 {
				return errors.New("not yet")
			}
			return nil
		})
		got(c.Do(r1))
		seen := 0
		should := func(_ *http.Request, resp *http.Response, _ error) (retryhttp.Decision, error) {
			if resp != nil && seen == 0 {
				seen++
				return retryhttp.DecisionRetry, nil
			}
			return retryhttp.DecisionDefer, nil
		}
		got(get(t, after(a, &retryhttp.Transport{Policy: retryhttp.Policy{BaseDelay: time.Millisecond}, ShouldRetry: should}), context.Background()))
		same(t, "a first answer refused, the second taken", b.attempts(), a.attempts(), 2)
	},
	"`Get`, `Head`, `Post`, `PostForm`": func(t *testing.T) {
		b, a := script(200), script(200)
		c := before(b)
		got(c.Head("http://api.test/x"))
		got(c.PostForm("http://api.test/x", url.Values{"k": {"v"}}))
		hc := after(a, &retryhttp.Transport{})
		got(hc.Head("http://api.test/x"))
		got(hc.PostForm("http://api.test/x", url.Values{"k": {"v"}}))
		same(t, "the same requests", fmt.Sprint(b.seen[0].method, b.seen[1].method, b.seen[1].body), fmt.Sprint(a.seen[0].method, a.seen[1].method, a.seen[1].body), "HEADPOSTk=v")
	},
	"`StandardClient()`": func(t *testing.T) {
		b, a := script(503, 200), script(503, 200)
		c := before(b)
		c.RetryWaitMin = time.Millisecond
		got(c.StandardClient().Get("http://api.test/x"))
		got(get(t, after(a, &retryhttp.Transport{Policy: retryhttp.Policy{BaseDelay: time.Millisecond}}), context.Background()))
		same(t, "a plain client that retries", b.attempts(), a.attempts(), 2)
	},
	"`RoundTripper{Client: c}`": func(t *testing.T) {
		b, a := script(0, 200), script(0, 200)
		c := before(b)
		c.RetryWaitMin = time.Millisecond
		r1, e1 := (&http.Client{Transport: &retryablehttp.RoundTripper{Client: c}}).Get("http://api.test/x")
		r2, e2 := get(t, after(a, &retryhttp.Transport{Policy: retryhttp.Policy{BaseDelay: time.Millisecond}}), context.Background())
		same(t, "a lost connection retried", got(r1, e1), got(r2, e2), "200")
	},
	"—": func(t *testing.T) {
		a := script(200)
		budget, err := retryhttp.NewBudget(retryhttp.BudgetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		got(after(a, &retryhttp.Transport{Budget: budget, Breaker: &retryhttp.Breaker{}, Throttle: &retryhttp.Throttle{},
			InjectIdempotencyKey: true}).Post("http://api.test/x", "text/plain", strings.NewReader("x")))
		if a.seen[0].header.Get("Idempotency-Key") == "" {
			t.Error("no key injected")
		}
	},
}

// same reports a row whose two forms differ, or differ from want.
func same[T comparable](t *testing.T, what string, before, after, want T) {
	t.Helper()
	if before != want || after != want {
		t.Errorf("%s: go-retryablehttp %v, retryhttp %v; want %v", what, before, after, want)
	}
}

// TestMigratingRows runs every row of the go-retryablehttp and failsafe-go
// tables, and fails for a row without a test.
func TestMigratingRows(t *testing.T) {
	doc, err := os.ReadFile("MIGRATING.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, table := range []struct {
		from, to string
		header   string
		rows     map[string]func(*testing.T)
	}{
		{"## From hashicorp/go-retryablehttp: move to the Transport", "## From failsafe-go", "go-retryablehttp", rows},
		{"## From failsafe-go", "## From a hand-written loop", "failsafe-go", failsafeRows},
		{"## From a hand-written loop", "## Changes", "a hand-written loop", loopRows},
	} {
		t.Run(table.header, func(t *testing.T) { checkRows(t, string(doc), table.from, table.to, table.header, table.rows) })
	}
}

func checkRows(t *testing.T, doc, from, to, header string, tests map[string]func(*testing.T)) {
	start, end := strings.Index(doc, from), strings.Index(doc, to)
	if start < 0 || end < start {
		t.Fatalf("MIGRATING.md: %q is not where this test looks", from)
	}
	row := regexp.MustCompile("(?m)^\\| (.+?) \\| .+ \\|$")
	var cells []string
	for _, m := range row.FindAllStringSubmatch(doc[start:end], -1) {
		if c := m[1]; c != header && c != "---" {
			cells = append(cells, c)
		}
	}
	if len(cells) < 5 {
		t.Fatalf("%d rows found; the table is not where this test looks", len(cells))
	}
	for _, c := range cells {
		f, ok := tests[c]
		if !ok {
			t.Errorf("row %s has no test", c)
			continue
		}
		t.Run(c, func(t *testing.T) { synctest.Test(t, f) })
	}
	if len(tests) != len(cells) {
		t.Errorf("%d tests for %d rows: a test for a row that is gone", len(tests), len(cells))
	}
}

func retryhttpSilent() *slog.Logger { return slog.New(slog.DiscardHandler) }

// printfTo is a go-retryablehttp Logger writing to a buffer.
type printfTo struct{ w *bytes.Buffer }

func (p printfTo) Printf(format string, args ...any) { fmt.Fprintf(p.w, format+"\n", args...) }

func slogTo(w *bytes.Buffer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

package overload_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/retryhttp/retryhttp/overload"
)

// With the limit pinned at 10, sheddable requests are shed from 5 in
// flight, default ones from 8, critical ones at 10; a shed request never
// reaches the handler and is told when to come back.
func TestShedderShares(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{}
		s, err := overload.NewShedder(overload.ShedOptions{Limit: overload.Options{Min: 10, Max: 10, Name: "api", Hooks: []overload.Hook{rec}}})
		if err != nil {
			t.Fatal(err)
		}
		release := make(chan struct{})
		var ran atomic.Int64
		h := s.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			ran.Add(1)
			<-release
		}))
		serve := func(p string) *httptest.ResponseRecorder {
			r := httptest.NewRequest(http.MethodPost, "/charges", nil)
			if p != "" {
				r.Header.Set(overload.PriorityHeader, p)
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			return w
		}
		var wg sync.WaitGroup
		hold := func(p string, n int) {
			for range n {
				wg.Go(func() {
					if w := serve(p); w.Code != http.StatusOK {
						t.Errorf("a held %q request: %d", p, w.Code)
					}
				})
			}
			synctest.Wait()
		}
		hold("sheddable", 5)
		if w := serve("sheddable"); w.Code != http.StatusServiceUnavailable {
			t.Fatalf("a sheddable request with 5 of 10 in flight: %d, want 503", w.Code)
		} else if ra, err := strconv.Atoi(w.Header().Get("Retry-After")); err != nil || ra < 1 {
			t.Fatalf("Retry-After %q, want whole seconds >= 1", w.Header().Get("Retry-After"))
		}
		hold("", 3) // Default
		if w := serve("DEFAULT"); w.Code != http.StatusServiceUnavailable {
			t.Fatalf("a default request with 8 of 10 in flight: %d, want 503", w.Code)
		}
		hold("critical", 2)
		if w := serve("critical"); w.Code != http.StatusServiceUnavailable {
			t.Fatalf("a critical request with 10 of 10 in flight: %d, want 503", w.Code)
		}
		if got := ran.Load(); got != 10 {
			t.Fatalf("the handler ran %d times, want 10: a shed request reached it", got)
		}
		close(release)
		wg.Wait()
		refused := rec.kinds(overload.EventRefused)
		if len(refused) != 3 || refused[0].Priority != overload.Sheddable || refused[1].Priority != overload.Default ||
			refused[2].Priority != overload.Critical || refused[2].Name != "api" || refused[2].InFlight != 10 {
			t.Fatalf("refusal events: %+v", refused)
		}
	})
}

// The handler's context carries the request's priority, from its header
// or from a middleware outside the Shedder.
func TestShedderPriorityInContext(t *testing.T) {
	var got []overload.Priority
	h := (&overload.Shedder{}).Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, ok := overload.PriorityFrom(r.Context())
		if !ok {
			t.Error("no priority in the handler's context")
		}
		got = append(got, p)
	}))
	for _, r := range []*http.Request{
		httptest.NewRequest(http.MethodGet, "/", nil),
		func() *http.Request {
			r := httptest.NewRequest(http.MethodGet, "/", nil)
			r.Header.Set(overload.PriorityHeader, "Critical")
			return r
		}(),
		httptest.NewRequest(http.MethodGet, "/", nil).WithContext(overload.WithPriority(context.Background(), overload.Sheddable)),
		func() *http.Request {
			r := httptest.NewRequest(http.MethodGet, "/", nil)
			r.Header.Set(overload.PriorityHeader, "urgent!!") // unknown: Default
			return r
		}(),
	} {
		h.ServeHTTP(httptest.NewRecorder(), r)
	}
	want := []overload.Priority{overload.Default, overload.Critical, overload.Sheddable, overload.Default}
	if len(got) != len(want) {
		t.Fatalf("priorities %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("priorities %v, want %v", got, want)
		}
	}
}

func TestShedOptionsValidated(t *testing.T) {
	for _, tc := range []struct {
		opts overload.ShedOptions
		want string
	}{
		{overload.ShedOptions{Status: 500}, "Status 500"},
		{overload.ShedOptions{Limit: overload.Options{MaxKeys: 3}}, "MaxKeys 3"},
		{overload.ShedOptions{Limit: overload.Options{Min: -1}}, "Min"},
	} {
		if _, err := overload.NewShedder(tc.opts); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want an error naming %s", tc.opts, err, tc.want)
		}
	}
	s, err := overload.NewShedder(overload.ShedOptions{Status: http.StatusTooManyRequests, Limit: overload.Options{Min: 1, Max: 1}})
	if err != nil {
		t.Fatal(err)
	}
	release, started := make(chan struct{}), make(chan struct{})
	h := s.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(started)
		<-release
	}))
	done := make(chan struct{})
	go func() {
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/", nil))
		close(done)
	}()
	<-started
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/", nil).WithContext(overload.WithPriority(context.Background(), overload.Critical)))
	if w.Code != http.StatusTooManyRequests {
		t.Fatalf("a request over a limit of 1: %d, want 429", w.Code)
	}
	close(release)
	<-done
}

// For every pinned limit from 1 to 40, a request is admitted exactly
// while the requests in flight are fewer than its priority's share of the
// limit (half for a sheddable one, 80% for a default one, the whole limit
// for a critical one), and one request is always admitted: the shares are
// not rounded down on small limits.
func TestShedderSharesAtEveryLimit(t *testing.T) {
	shares := []struct {
		p        string
		num, den int // the share: num/den of the limit
	}{{"sheddable", 1, 2}, {"default", 4, 5}, {"critical", 1, 1}}
	for limit := 1; limit <= 40; limit++ {
		for _, sh := range shares {
			// The largest in-flight count that admits one more: the
			// greatest n with n < limit*num/den, and never below 0.
			want := max(0, (limit*sh.num-1)/sh.den)
			t.Run(fmt.Sprint(limit, "/", sh.p), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					s, err := overload.NewShedder(overload.ShedOptions{Limit: overload.Options{Min: limit, Max: limit}})
					if err != nil {
						t.Fatal(err)
					}
					release := make(chan struct{})
					h := s.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-release }))
					serve := func() int {
						r := httptest.NewRequest(http.MethodPost, "/", nil)
						r.Header.Set(overload.PriorityHeader, sh.p)
						w := httptest.NewRecorder()
						h.ServeHTTP(w, r)
						return w.Code
					}
					var wg sync.WaitGroup
					admittedAt := -1 // the largest in-flight count a request was admitted at
					for n := 0; n <= limit; n++ {
						codes := make(chan int, 1)
						wg.Go(func() { codes <- serve() })
						synctest.Wait()
						select {
						case code := <-codes:
							if code != http.StatusServiceUnavailable {
								t.Fatalf("limit %d, %s at %d in flight: %d", limit, sh.p, n, code)
							}
						default: // admitted: held in the handler
							admittedAt = n
							continue
						}
						break
					}
					close(release)
					wg.Wait()
					if admittedAt != want {
						t.Errorf("limit %d: a %s request is admitted up to %d in flight, want %d (fewer than %d/%d of the limit, one always)",
							limit, sh.p, admittedAt, want, sh.num, sh.den)
					}
				})
			})
		}
	}
}

// A request's priority at the Shedder is its valid header's (any case),
// else its context's (set by a middleware outside), else Default: a
// misspelled header is ignored, never a way past the context's.
func TestShedderPriorityOfARequest(t *testing.T) {
	crit, shed := overload.Critical, overload.Sheddable
	cases := []struct {
		header string
		ctx    *overload.Priority
		want   overload.Priority
	}{
		{"", nil, overload.Default},
		{"", &crit, overload.Critical},
		{"SHEDDABLE", nil, overload.Sheddable},
		{"sheddable", &crit, overload.Sheddable},
		{"default", &crit, overload.Default},
		{"critcal", &shed, overload.Sheddable},
		{"critcal", nil, overload.Default},
		{" critical", nil, overload.Default},
	}
	s, err := overload.NewShedder(overload.ShedOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		var got overload.Priority
		h := s.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got, _ = overload.PriorityFrom(r.Context()) }))
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		if c.header != "" {
			r.Header.Set(overload.PriorityHeader, c.header)
		}
		if c.ctx != nil {
			r = r.WithContext(overload.WithPriority(r.Context(), *c.ctx))
		}
		h.ServeHTTP(httptest.NewRecorder(), r)
		if got != c.want {
			t.Errorf("header %q, context %v: the handler saw %v, want %v", c.header, c.ctx, got, c.want)
		}
	}
}

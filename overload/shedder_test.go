package overload_test

import (
	"context"
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

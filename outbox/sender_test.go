package outbox_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/retryhttp/retryhttp"
	"github.com/retryhttp/retryhttp/idempotency"
	"github.com/retryhttp/retryhttp/outbox"
	"github.com/retryhttp/retryhttp/outbox/internal/outboxtest"
	"github.com/retryhttp/retryhttp/queue"
)

// A Sender registered under a scheme delivers that scheme's messages:
// what it accepts is delivered, what it refuses for good is dead at once,
// a failure is retried after at least the wait it asked for, with the same
// ID, and a scheme no Sender has is dead at its first delivery, with the
// reason recorded: no retry of this relay could send it.
func TestSenderByScheme(t *testing.T) {
	p := outboxtest.Pool(t)
	o := outboxtest.New(t, p)
	ctx := context.Background()
	var mu sync.Mutex
	seen := map[string][]outbox.Delivery{}
	at := map[string][]time.Time{}
	sender := outbox.SenderFunc(func(ctx context.Context, d outbox.Delivery) outbox.Result {
		mu.Lock()
		defer mu.Unlock()
		seen[d.URL.Opaque] = append(seen[d.URL.Opaque], d)
		at[d.URL.Opaque] = append(at[d.URL.Opaque], time.Now())
		switch {
		case d.URL.Opaque == "refused":
			return outbox.Result{Err: errors.New("no such queue"), Final: true}
		case d.URL.Opaque == "flaky" && d.Deliveries == 1:
			return outbox.Result{Err: errors.New("broker busy"), Wait: 200 * time.Millisecond}
		}
		return outbox.Result{}
	})
	idOK, _ := o.Enqueue(ctx, p, outbox.Message{URL: "test:ok", Body: []byte("hello")})
	idRefused, _ := o.Enqueue(ctx, p, outbox.Message{URL: "test:refused"})
	idFlaky, _ := o.Enqueue(ctx, p, outbox.Message{URL: "test:flaky"})
	idNone, _ := o.Enqueue(ctx, p, outbox.Message{URL: "elsewhere:x"})
	events := &eventLog{}
	outboxtest.Run(t, outbox.RelayOptions{Outbox: o, Senders: map[string]outbox.Sender{"test": sender}, Hooks: []outbox.Hook{events.hook()},
		PollInterval:  5 * time.Millisecond,
		MaxDeliveries: 3, Backoff: queue.Backoff{Base: 10 * time.Millisecond, Max: 10 * time.Millisecond, Jitter: retryhttp.JitterNone},
		MaxRetryAfter: time.Second})
	outboxtest.Eventually(t, "every message settled", func() bool {
		return state(t, o, idOK).Status == outbox.Delivered && state(t, o, idRefused).Status == outbox.Dead &&
			state(t, o, idFlaky).Status == outbox.Delivered && state(t, o, idNone).Status == outbox.Dead
	})
	mu.Lock()
	defer mu.Unlock()
	if d := seen["ok"]; len(d) != 1 || d[0].ID != idOK || string(d[0].Body) != "hello" || d[0].Method != "POST" || d[0].Deliveries != 1 {
		t.Errorf("ok: %+v", d)
	}
	if s := state(t, o, idOK); s.LastStatus != 200 {
		t.Errorf("ok: %+v, want LastStatus 200 for a Sender without statuses", s)
	}
	if d, s := seen["refused"], state(t, o, idRefused); len(d) != 1 || s.Deliveries != 1 || s.LastError != "no such queue" {
		t.Errorf("refused: %d sends, %+v; want dead after 1 with its error", len(d), s)
	}
	if d := seen["flaky"]; len(d) != 2 || d[0].ID != idFlaky || d[1].ID != idFlaky || d[1].Deliveries != 2 {
		t.Errorf("flaky: %+v", d)
	} else if gap := at["flaky"][1].Sub(at["flaky"][0]); gap < 200*time.Millisecond {
		t.Errorf("flaky was sent again %v later, want at least the 200 ms it asked for", gap)
	}
	if s := state(t, o, idNone); s.Deliveries != 1 || !strings.Contains(s.LastError, `no Sender for scheme "elsewhere"`) {
		t.Errorf("no sender: %+v; want dead after 1 delivery, the reason recorded", s)
	}
	if got := strings.Join(events.list(), ","); !strings.Contains(got, "dead "+idRefused+" 0 1") || !strings.Contains(got, "retried "+idFlaky+" 0 1") {
		t.Errorf("events %s", got)
	}
}

// NewRelay refuses Senders it could not use.
func TestSendersValidated(t *testing.T) {
	o := outboxtest.New(t, outboxtest.Pool(t))
	ok := outbox.SenderFunc(func(context.Context, outbox.Delivery) outbox.Result { return outbox.Result{} })
	for scheme, s := range map[string]outbox.Sender{"https": ok, "NATS": ok, "": ok, "nats": nil} {
		if _, err := outbox.NewRelay(outbox.RelayOptions{Outbox: o, Senders: map[string]outbox.Sender{scheme: s}}); err == nil {
			t.Errorf("scheme %q (%v): NewRelay accepted it", scheme, s)
		}
	}
}

// Enqueue refuses a URL that no relay could ever deliver, before it is
// written: the mistake shows at once, not after MaxAttempts deliveries.
func TestEnqueueRefusesUndeliverableURLs(t *testing.T) {
	p := outboxtest.Pool(t)
	o := outboxtest.New(t, p)
	for _, u := range []string{"", "/orders", "orders.placed", "http://", "https:///path", "nats:", "amqp:", "http://[::1", "nats://"} {
		if id, err := o.Enqueue(context.Background(), p, outbox.Message{URL: u}); err == nil {
			t.Errorf("Enqueue(%q) = %s, want an error", u, id)
		}
	}
	for _, u := range []string{"https://api.test/charges", "nats:orders.placed", "amqp:orders/placed", "test:x"} {
		if _, err := o.Enqueue(context.Background(), p, outbox.Message{URL: u}); err != nil {
			t.Errorf("Enqueue(%q): %v", u, err)
		}
	}
}

// Every message is delivered with an Idempotency-Key, whatever its Sender
// and whatever its header holds: its own (under any case of the name, or
// the X- name alone, which is kept), or else its ID; the header's other
// names arrive in canonical form, and the enqueued header is what the
// next delivery starts from again. Over HTTP, to a receiver behind the
// idempotency middleware whose first answer to each message is lost, each
// message has one effect.
func TestEveryDeliveryCarriesAKey(t *testing.T) {
	p := outboxtest.Pool(t)
	o := outboxtest.New(t, p)
	ctx := context.Background()
	family := outboxtest.KeyFamily(18)

	var mu sync.Mutex
	effects := map[string]int{}    // Idempotency-Key: handler runs
	answered := map[string]bool{}  // Idempotency-Key: an answer was lost once
	gotHTTP := map[string]string{} // path: Idempotency-Key
	mw, err := idempotency.New(idempotency.Options{Logger: outboxtest.Quiet})
	if err != nil {
		t.Fatal(err)
	}
	inner := mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		effects[r.Header.Get("Idempotency-Key")]++
		mu.Unlock()
		w.WriteHeader(http.StatusCreated)
	}))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := r.Header.Get("Idempotency-Key")
		mu.Lock()
		gotHTTP[r.URL.Path] = key
		lose := !answered[key]
		answered[key] = true
		mu.Unlock()
		if lose { // the handler runs, its answer never reaches the relay
			inner.ServeHTTP(httptest.NewRecorder(), r)
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		inner.ServeHTTP(w, r)
	}))
	defer srv.Close()

	gotSender := map[string][]http.Header{} // message ID: the header of each delivery
	sender := outbox.SenderFunc(func(_ context.Context, d outbox.Delivery) outbox.Result {
		mu.Lock()
		defer mu.Unlock()
		gotSender[d.ID] = append(gotSender[d.ID], d.Header.Clone())
		d.Header.Set("Idempotency-Key", "changed by the Sender") // must not leak into the next delivery
		if len(gotSender[d.ID]) == 1 {
			return outbox.Result{Err: errors.New("broker busy")}
		}
		return outbox.Result{}
	})

	type sent struct {
		id, key, path string
		k             outboxtest.Keyed
	}
	var all []sent
	for i, k := range family {
		path := fmt.Sprint("/m", i)
		for _, u := range []string{srv.URL + path, "test:q"} {
			id, err := o.Enqueue(ctx, p, outbox.Message{URL: u, Header: k.Header})
			if err != nil {
				t.Fatal(err)
			}
			key := k.Key
			if key == "" {
				key = id
			}
			all = append(all, sent{id, key, path, k})
			if u == "test:q" {
				all[len(all)-1].path = ""
			}
		}
	}
	outboxtest.Run(t, outbox.RelayOptions{Outbox: o, PollInterval: 5 * time.Millisecond, Senders: map[string]outbox.Sender{"test": sender},
		Backoff: queue.Backoff{Base: 10 * time.Millisecond, Max: 10 * time.Millisecond}})
	outboxtest.Eventually(t, "every message delivered", func() bool { return outboxtest.Pending(t, p, o) == 0 })

	mu.Lock()
	defer mu.Unlock()
	for _, s := range all {
		if s.path != "" {
			if got := gotHTTP[s.path]; got != s.key {
				t.Errorf("HTTP message %s (header %v) arrived with Idempotency-Key %q, want %q", s.id, s.k.Header, got, s.key)
			}
			if effects[s.key] != 1 {
				t.Errorf("HTTP message %s (header %v) had %d effects, want 1", s.id, s.k.Header, effects[s.key])
			}
			continue
		}
		hs := gotSender[s.id]
		if len(hs) != 2 {
			t.Fatalf("message %s was sent %d times, want 2", s.id, len(hs))
		}
		h := hs[1]
		if got := h.Get("Idempotency-Key"); got != s.key {
			t.Errorf("message %s (header %v) reached its Sender with Idempotency-Key %q, want %q", s.id, s.k.Header, got, s.key)
		}
		for name, vs := range s.k.Header {
			if name == http.CanonicalHeaderKey("Idempotency-Key") {
				continue
			}
			if _, ok := h[http.CanonicalHeaderKey(name)]; !ok || !slices.Equal(h.Values(name), vs) {
				t.Errorf("message %s: header %q = %q, want %q under its canonical name (got %v)", s.id, name, h.Values(name), vs, h)
			}
		}
	}
}

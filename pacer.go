package retryhttp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/retryhttp/retryhttp/internal/defaults"
	"github.com/retryhttp/retryhttp/internal/pace"
	"github.com/retryhttp/retryhttp/overload"
)

// errPaced is what a *RetryError with ReasonPaced wraps: the request
// would exceed its host's rate-limit quota, which comes back only after
// the Pacer's MaxWait or the context's deadline, and was not sent.
var errPaced = errors.New("retryhttp: rate limit quota exhausted until its reset")

// Pacer spreads the requests to each host over the rate-limit window the
// host announces, so that they stay within its quota instead of meeting
// 429s: from the headers of every response (the IETF RateLimit field, the
// older RateLimit-Remaining and -Reset, GitHub's and GitLab's
// X-RateLimit-Remaining and -Reset, OpenAI's x-ratelimit-remaining-requests
// and -reset-requests, and its token quota once spent), it knows how many
// requests are left and when the window resets, and sends the next
// request no sooner than the time left over the requests left allows. A request that finds the quota spent is
// held until the reset, and one whose wait would pass MaxWait or its
// context's deadline ends at once, nothing sent: a *RetryError with
// ReasonPaced. Critical
// requests (overload.WithPriority) are not spread: they take the next
// request left at once, and are held only when none is.
//
// After a window resets, one request goes first and the others wait for
// its answer (at most a second): the new window's quota is not known.
// A reset told in whole seconds is read as rounded up until the host
// proves it rounds down, and the requests left are spread to be sent
// before it, by up to a second (see docs/client.md).
//
// A host that sends no rate-limit header is not paced: each of its
// responses costs a lookup of one header name, and a host that sends
// them on every response is paced from within a few responses (or from
// its first 429). Set Transport.Pacer;
// share one Pacer between the Transports that call one API with one
// quota. It keeps up to 4096 hosts, forgetting first those that sent no
// rate-limit header. The zero Pacer is ready to use, as a Hedging is: no
// constructor, its fields its options. It is safe for concurrent use
// once in use; set its fields before.
type Pacer struct {
	// MaxWait is the longest a request is held for its quota; one that
	// would wait longer ends with ReasonPaced. 0 (or less) means 30 s.
	MaxWait time.Duration
	// Logger is told, once, of a rate-limit header whose value is out of
	// range (negative, unparsable, or a reset past a day), which the
	// Pacer then ignores or caps, and, once, of a Store that failed. nil
	// means slog.Default().
	Logger *slog.Logger
	// Store, if set, holds each host's quota for every process whose
	// Pacer has the same Store: the replicas of a service that call one
	// API with one key share its quota, each request taking its slot from
	// the one window they all read and tell (redispacer.Store keeps it in
	// Redis). nil keeps it in this process. A request the Store fails for
	// is sent unpaced, as if there were no Pacer, and the failure logged
	// once: a 429 is then retried as without one.
	Store PacerStore

	mu          sync.Mutex
	hosts       map[string]*hostPace
	warned      atomic.Bool // a header value out of range was logged
	storeFailed atomic.Bool // a Store's failure was logged
}

const (
	// maxWindow caps a reset a host announces: a window longer than a
	// day is read as a day.
	maxWindow = 24 * time.Hour
)

func (p *Pacer) maxWait() time.Duration {
	if p.MaxWait > 0 {
		return p.MaxWait
	}
	return defaults.PacerMaxWait
}

func (p *Pacer) logger() *slog.Logger {
	if p.Logger != nil {
		return p.Logger
	}
	return slog.Default()
}

// host returns u's host's pace, made on first use.
func (p *Pacer) host(u *url.URL) *hostPace {
	key := u.Scheme + "://" + u.Host
	p.mu.Lock()
	defer p.mu.Unlock()
	h := p.hosts[key]
	if h == nil {
		if p.hosts == nil {
			p.hosts = map[string]*hostPace{}
		}
		if len(p.hosts) >= maxPacedHosts {
			p.forget()
		}
		h = &hostPace{pacer: p, key: key}
		p.hosts[key] = h
	}
	return h
}

// maxPacedHosts bounds the hosts a Pacer keeps: a client that calls many
// hosts (a crawler, a webhook sender) does not grow it without end.
const maxPacedHosts = 4096

// forget makes room among the hosts: those that never sent a rate-limit
// header hold nothing and go first; if every host did, half of them go
// (their next responses tell their quotas again). p.mu is held.
func (p *Pacer) forget() {
	for k, h := range p.hosts {
		if !h.seen.Load() {
			delete(p.hosts, k)
		}
	}
	for k := range p.hosts {
		if len(p.hosts) < maxPacedHosts/2 {
			break
		}
		delete(p.hosts, k)
	}
}

// hostPace is one host's quota as its responses last told it.
type hostPace struct {
	pacer *Pacer
	key   string // its key in the Pacer's Store: scheme://host

	// seen is whether the host has sent a rate-limit header: until it
	// has, allow does nothing (no lock, no clock), and report looks for
	// one header name of quotaNames a response (all of them in a 429).
	seen atomic.Bool

	mu    sync.Mutex
	w     pace.Window   // the window, unless the Pacer has a Store
	probe chan struct{} // closed when the probe out is answered; nil when none is
}

// allow holds the caller until its request may be sent within the
// quota, or refuses it with ReasonPaced when that is past the Pacer's
// MaxWait or ctx's deadline; seq is then its admission's number, for
// report. A caller that may not wait (a hedge) is refused rather than
// held. A request held for a spent quota asks again at the reset; after a
// reset, one request goes first and the others ask again at its answer
// (pace.Window.Take).
func (h *hostPace) allow(ctx context.Context, mayWait bool, seq *int64) (Reason, error) {
	if !h.seen.Load() {
		return ReasonNone, nil
	}
	p, _ := overload.PriorityFrom(ctx)
	var start time.Time
	for {
		now := time.Now()
		if start.IsZero() {
			start = now
		}
		limit := h.pacer.maxWait() - now.Sub(start)
		if d, ok := ctx.Deadline(); ok {
			limit = min(limit, d.Sub(now))
		}
		if !mayWait {
			limit = 0
		}
		op, stored := h.update(ctx, windowOp{kind: opTake, now: now, critical: p == overload.Critical, limit: limit})
		if !stored {
			*seq = 0
			return h.unstored(ctx)
		}
		t, ok := op.turn, op.ok
		if !ok {
			return ReasonPaced, fmt.Errorf("%w: next request in %v", errPaced, t.Wait.Round(time.Millisecond))
		}
		*seq = t.Seq
		if t.Held && op.probing && h.pacer.Store != nil {
			t.Wait = min(t.Wait, pace.StorePoll) // the probe may be answered in another process
		}
		if t.Wait > 0 {
			timer := time.NewTimer(t.Wait)
			select {
			case <-timer.C:
			case <-op.probe: // nil unless held for the probe
			case <-ctx.Done():
				timer.Stop()
				h.answer(t.Seq, false)
				return ReasonCanceled, ctx.Err()
			}
			timer.Stop()
			if !t.Held {
				// Its slot has come: sent if a response read meanwhile
				// did not show the key's other users took its room.
				c, stored := h.update(ctx, windowOp{kind: opConfirm, seq: t.Seq})
				if !stored {
					*seq = 0
					return h.unstored(ctx)
				}
				if !c.ok {
					*seq = 0
					continue
				}
			}
		}
		if !t.Held {
			return ReasonNone, nil
		}
	}
}

// unstored is allow's answer when the Pacer's Store failed: the request
// goes unpaced, unless its context is done.
func (h *hostPace) unstored(ctx context.Context) (Reason, error) {
	if err := ctx.Err(); err != nil {
		return ReasonCanceled, err
	}
	return ReasonNone, nil
}

// windowOp is one operation on a host's window, and what it returned:
// a value, so that a Pacer without a Store takes no allocation for it,
// and one with a Store can apply it again to the state another process
// changed meanwhile.
type windowOp struct {
	kind     opKind
	now      time.Time
	critical bool          // opTake
	limit    time.Duration // opTake: the longest wait
	seq      int64         // opConfirm, opAnswer, opTell
	given    bool          // opAnswer
	q        pace.Quota    // opTell

	turn    pace.Turn     // opTake
	ok      bool          // opTake, opConfirm
	probing bool          // opTake: a probe is out
	probe   chan struct{} // opTake, held for a probe in this process: closed at its answer
}

type opKind uint8

const (
	opTake opKind = iota
	opConfirm
	opAnswer
	opTell
)

// apply runs op on w.
func (op *windowOp) apply(w *pace.Window) {
	switch op.kind {
	case opTake:
		op.turn, op.ok = w.Take(op.now, op.critical, op.limit)
		op.probing = w.Probing()
	case opConfirm:
		op.ok = w.Confirm(op.seq)
	case opAnswer:
		w.Answer(op.seq, op.given)
	case opTell:
		w.Tell(op.now, op.seq, op.q)
	}
}

// update applies op to the host's window: under h.mu, or, when the
// Pacer has a Store, to the window stored there. It reports false when
// the Store failed; the failure is logged once.
func (h *hostPace) update(ctx context.Context, op windowOp) (windowOp, bool) {
	if h.pacer.Store != nil {
		return h.updateStored(ctx, op)
	}
	h.mu.Lock()
	op.apply(&h.w)
	if op.probing {
		if h.probe == nil {
			h.probe = make(chan struct{})
		}
		if op.turn.Held {
			op.probe = h.probe
		}
	}
	h.wake()
	h.mu.Unlock()
	return op, true
}

// updateStored is update through the Pacer's Store, which may apply op
// more than once: each time to the state as it then is.
func (h *hostPace) updateStored(ctx context.Context, op windowOp) (windowOp, bool) {
	err := h.pacer.Store.Update(ctx, h.key, func(state []byte) []byte {
		var w pace.Window
		_ = w.Decode(state) // not a Window (none yet, or another version's): the zero Window, which the next response tells
		op.apply(&w)
		return w.Append(nil)
	})
	if err != nil && ctx.Err() == nil && h.pacer.storeFailed.CompareAndSwap(false, true) {
		h.pacer.logger().Warn("retryhttp: the Pacer's Store failed; requests go unpaced while it does", "host", h.key, "error", err)
	}
	return op, err == nil
}

// cancel gives back an admitted request that a later brake refused.
func (h *hostPace) cancel(seq int64) { h.answer(seq, true) }

// answer tells the window that admission seq ended without a word on
// the quota; given, that it was not sent after all.
func (h *hostPace) answer(seq int64, given bool) {
	if seq <= 0 {
		return
	}
	h.update(context.Background(), windowOp{kind: opAnswer, seq: seq, given: given})
}

// wake lets the requests held for a probe go once it is answered; h.mu
// is held.
func (h *hostPace) wake() {
	if h.probe != nil && !h.w.Probing() {
		close(h.probe)
		h.probe = nil
	}
}

// report reads the quota from the response to admission seq (resp nil:
// the request failed, and says nothing of the quota).
func (h *hostPace) report(resp *http.Response, seq int64) {
	if resp == nil || !h.seen.Load() && resp.StatusCode != http.StatusTooManyRequests &&
		field(resp.Header, quotaNames[rand.Uint32N(uint32(len(quotaNames)))]) == "" {
		h.answer(seq, false)
		return
	}
	q, now, ok := readQuota(resp.Header, time.Now)
	if !ok {
		h.answer(seq, false)
		return
	}
	h.seen.Store(true)
	if q.bad && h.pacer.warned.CompareAndSwap(false, true) {
		h.pacer.logger().Warn("retryhttp: a rate-limit header out of range was ignored or capped", "host", resp.Request.URL.Host)
	}
	if q.bad && q.reset == 0 && q.remaining == 0 {
		h.answer(seq, false) // nothing usable
		return
	}
	h.update(context.Background(), windowOp{kind: opTell, now: now, seq: seq,
		q: pace.Quota{Remaining: q.remaining, Reset: now.Add(q.reset), Coarse: q.coarse}})
}

// quotaNames are the headers that open each dialect readQuota reads.
// Until a host has sent one, report looks for one of them in each of its
// responses, at random (and for all in a 429): a host that sends none
// costs one lookup a response, and one that sends them on every response
// is found within a few. OpenAI's token headers come with its request
// headers, and a 429 is read whole: the token pair needs no name here,
// which would make every other host's found more slowly.
var quotaNames = [...]string{"Ratelimit", "Ratelimit-Remaining", "X-Ratelimit-Remaining", openAIQuotas[0].remaining}

// quota is what a response's headers say of its host's rate limit: the
// requests left, and the time until the window resets.
type quota struct {
	remaining int64
	reset     time.Duration
	coarse    bool // the reset was told in whole seconds (rounded up, it may be a second late)
	bad       bool // a value was out of range: ignored or capped
}

// readQuota reads a response's rate-limit headers, in the dialects of
// DefaultRetryHints, at clock's time, which it reads only when there is
// a quota; ok is false where none is there.
func readQuota(hd http.Header, clock func() time.Time) (q quota, now time.Time, ok bool) {
	if v := field(hd, "Ratelimit"); v != "" {
		if q, ok = parseQuotaField(v); ok {
			return q, clock(), true
		}
	}
	for _, d := range quotaDialects {
		rem := trimOWS(field(hd, d.remaining))
		if rem == "" {
			continue
		}
		reset := trimOWS(field(hd, d.reset))
		if reset == "" {
			continue
		}
		now = clock()
		q, ok = parseQuota(rem, reset, d.durations, now)
		break
	}
	if t, spent := tokensSpent(hd); spent && (!ok || q.bad || q.remaining > 0 || q.reset < t) {
		if now.IsZero() {
			now = clock()
		}
		return quota{reset: t}.capped(), now, true
	}
	if !ok {
		return quota{}, time.Time{}, false
	}
	return q, now, true
}

// tokensSpent reads OpenAI's token quota: spent, with the time until it
// resets, when x-ratelimit-remaining-tokens is 0. A token quota counts
// what a request costs, which the Pacer cannot know before it is sent:
// it is not spread, but a spent one holds every request until its reset,
// as a spent request quota does.
func tokensSpent(hd http.Header) (time.Duration, bool) {
	tokens := openAIQuotas[1]
	if trimOWS(field(hd, tokens.remaining)) != "0" {
		return 0, false
	}
	d, err := time.ParseDuration(trimOWS(field(hd, tokens.reset)))
	return d, err == nil && d > 0
}

// quotaDialects are the header pairs readQuota reads after the IETF
// field: the remaining count and the reset, seconds or a Unix time (told
// apart as ResetUnitAuto does), or Go durations.
var quotaDialects = [...]struct {
	remaining, reset string
	durations        bool
}{
	{"Ratelimit-Remaining", "Ratelimit-Reset", false},
	{"X-Ratelimit-Remaining", "X-Ratelimit-Reset", false},
	{openAIQuotas[0].remaining, openAIQuotas[0].reset, true},
}

// parseQuota reads one dialect's pair.
func parseQuota(remaining, reset string, durations bool, now time.Time) (quota, bool) {
	var q quota
	n, err := strconv.ParseInt(remaining, 10, 64)
	if err != nil || n < 0 {
		return quota{bad: true}, true
	}
	q.remaining = n
	if durations {
		d, err := time.ParseDuration(reset)
		if err != nil || d < 0 {
			return quota{bad: true}, true
		}
		q.reset = d
	} else {
		d, ok := parseReset(reset, ResetUnitAuto, now)
		if !ok {
			return quota{bad: true}, true
		}
		q.reset, q.coarse = d, true
	}
	return q.capped(), true
}

// parseQuotaField reads the IETF RateLimit field: the item that leaves
// the fewest requests a second (r over t) is the quota that binds.
func parseQuotaField(v string) (quota, bool) {
	best, found := quota{}, false
	for it := range rateLimitItems(v) {
		best.bad = best.bad || it.bad
		r, t := it.r, it.t
		if r < 0 || t < 0 {
			continue
		}
		q := quota{remaining: int64(min(r, 1<<62)), reset: seconds(t), coarse: true}
		if !found || q.rate() < best.rate() {
			bad := best.bad
			best, found = q, true
			best.bad = bad
		}
	}
	return best.capped(), found
}

// rate is the requests a second the quota leaves.
func (q quota) rate() float64 {
	if q.reset <= 0 {
		return float64(q.remaining) * 1e9
	}
	return float64(q.remaining) / q.reset.Seconds()
}

// capped caps the reset at maxWindow.
func (q quota) capped() quota {
	if q.reset > maxWindow {
		q.reset, q.bad = maxWindow, true
	}
	return q
}

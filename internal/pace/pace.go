// Package pace is the arithmetic of one host's rate-limit quota as a
// client reads it from the host's responses: the requests left in the
// window, when it resets, and when the next request may go so that the
// requests left are spread over the time left. Time is passed in, so that
// retryhttp.Pacer and the retrystorm simulator share it.
package pace

import "time"

// Window is one host's quota as its responses last told it, and the
// requests admitted against it. The zero Window knows nothing: Take lets
// every request go until Tell is called. It is not safe for concurrent
// use; its owner locks it.
type Window struct {
	known     bool
	remaining int64     // requests left in the window
	reset     time.Time // when the window resets
	by        time.Time // when the requests left are to have been sent: the reset, or earlier
	next      time.Time // the next send a spread request may have

	admitted int64 // requests admitted: the last one's number
	answered int64 // of those, answered, or not sent after all
	newest   int64 // the admission whose response told the quota last
	probe    probeState
	probeSeq int64     // the probe's admission
	probeEnd time.Time // when the requests held for it stop waiting for it
	early    bool      // the host's coarse resets proved early: read a second later
	over     int64     // requests admitted that the window has no room for: the next to Confirm yield
}

// probeState is where a window that has reset is in learning its
// successor: after a reset, one request (the probe) goes first, and the
// others wait for its answer, since the new window's quota is not known
// and all of them at once could exceed it.
type probeState uint8

// ProbeWait bounds how long the requests held for a probe wait for its
// answer: a slow or lost probe delays the others by at most this much.
const ProbeWait = time.Second

// ResetGrace is how long the requests wait after a response that said
// none are left and gave a reset already past: a reset rounded down, by
// less than this to the millisecond, and by up to a second when told in
// whole seconds (which a probe then finds out; see Tell).
const ResetGrace = 10 * time.Millisecond

// StorePoll is how often a request held for a probe asks again when the
// Window is shared by processes (through a retryhttp.PacerStore): the
// probe may be answered in another process, which cannot wake it.
const StorePoll = 50 * time.Millisecond

const (
	probeNone probeState = iota
	probeDue             // the window reset: the next request is the probe
	probeOut             // the probe is out: the others wait for its answer
)

// Turn is what Take gives a request.
type Turn struct {
	// Seq is its admission's number, for Tell or Answer; 0 when Held.
	Seq int64
	// Wait is how long it waits before it is sent (then asking Confirm
	// first); or, when Held, before it asks again.
	Wait time.Duration
	// Held is whether it took nothing and must ask again after Wait: at
	// the reset of a spent quota, or when the probe it waits for is
	// answered (Probing turns false) or has taken ProbeWait.
	Held bool
}

// Known reports whether the quota is known: a response has told it, and
// its window has not reset since.
func (w *Window) Known() bool { return w.known }

// Probing reports whether a probe is out, and requests wait for its
// answer.
func (w *Window) Probing() bool { return w.probe == probeOut }

// Take admits a request at now, or holds or refuses it. A request that
// finds the quota spent is held for the reset and takes nothing; the
// first one past the reset goes at once as the probe, and the others are
// held until its answer. A request whose wait would pass maxWait is
// refused (ok false) and changes nothing, so that the requests refused
// do not push the next slot on. The requests left are spread over the
// time left; a critical request is not: it takes the next request left
// at once.
func (w *Window) Take(now time.Time, critical bool, maxWait time.Duration) (t Turn, ok bool) {
	if w.known && !now.Before(w.reset) {
		w.known, w.next, w.probe = false, time.Time{}, probeDue
	}
	if w.probe == probeOut && !now.Before(w.probeEnd) {
		w.probe = probeNone // slow or lost: the others go
	}
	if !w.known {
		switch w.probe {
		case probeOut:
			// Held for as long as it may wait, asking again after.
			return Turn{Wait: min(w.probeEnd.Sub(now), maxWait), Held: true}, maxWait > 0
		case probeDue:
			w.probe, w.probeSeq, w.probeEnd = probeOut, w.admit(), now.Add(ProbeWait)
			return Turn{Seq: w.probeSeq}, true
		}
		return Turn{Seq: w.admit()}, true
	}
	slot := now
	if !critical && w.next.After(now) {
		slot = w.next
	}
	if w.remaining == 0 || !slot.Before(w.reset) {
		wait := w.reset.Sub(now)
		return Turn{Wait: wait, Held: true}, wait <= maxWait
	}
	wait := slot.Sub(now)
	if wait > maxWait {
		return Turn{Wait: wait}, false
	}
	w.next = slot.Add(max(0, w.by.Sub(slot)) / time.Duration(w.remaining))
	w.remaining--
	return Turn{Seq: w.admit(), Wait: wait}, true
}

func (w *Window) admit() int64 {
	w.admitted++
	return w.admitted
}

// Confirm is asked by a request admitted with a wait when the wait is
// over, before it is sent: false if a response read meanwhile showed the
// window has no room for it (the key's other users took it), and then it
// is answered, and must Take again.
func (w *Window) Confirm(seq int64) bool {
	if w.over <= 0 {
		return true
	}
	w.over--
	w.answer(seq)
	return false
}

// Answer records that admission seq ended without telling the quota: it
// failed, its response said nothing of the quota, or it was not sent
// after all (then given, its request goes back to the quota). The probe's
// answer lets the requests held for it go.
func (w *Window) Answer(seq int64, given bool) {
	if seq <= 0 || seq > w.admitted {
		return // not this Window's: see Tell
	}
	if given && w.known {
		w.remaining++
	}
	w.answer(seq)
}

// answer counts seq's answer; the probe's (or a later request's,
// whichever comes first) lets the requests held for it go.
func (w *Window) answer(seq int64) {
	if seq <= 0 || seq > w.admitted {
		return
	}
	w.answered++
	if w.probe == probeOut && seq >= w.probeSeq {
		w.probe = probeNone
	}
}

// Quota is what one response said of the quota.
type Quota struct {
	// Remaining is the requests left when the server answered.
	Remaining int64
	// Reset is when the window resets. Coarse is whether it was told in
	// whole seconds: rounded up, it may be up to a second late.
	Reset  time.Time
	Coarse bool
}

// Tell records what the response to admission seq (0: one not admitted
// by Take) said at now. The response to the latest admission tells the
// most: an older one's is ignored.
//
// A coarse reset is read as rounded up, as the IETF drafts ask, until
// the host proves it rounds down: a probe, sent after the reset, answered
// with a reset already past. Its resets are read a second later from then
// on.
//
// The requests left are what the server said, less those it may not have
// counted: those admitted since, or, if more, all those in flight (one
// sent before may have reached the server after). So the count errs low,
// and a reset within a second of the one known is the same window (told
// in whole seconds and rounded up): the fewest requests left are kept,
// and the earliest reset.
//
// A coarse reset is spread to a second before it (or, less than two
// seconds away, to half the time left), so that few of the requests left
// are lost to a window that has already ended; those sent after it has
// are counted in the next, whose probe learns so. The quota counts
// requests, not their spacing: the spreading keeps them from arriving in
// a burst, and so few are in flight at once, when the count of those
// left errs low by them.
func (w *Window) Tell(now time.Time, seq int64, q Quota) {
	if seq > w.admitted {
		// Admitted by a Window since lost (a shared one its store
		// dropped): told as by a request this one did not admit.
		seq = 0
	}
	probe := w.probe == probeOut && seq == w.probeSeq
	w.answer(seq)
	if q.Coarse && probe && !q.Reset.After(now) {
		// Sent after the reset the last window told, the probe was
		// answered with a reset already past: the host rounds down.
		w.early = true
	}
	if q.Coarse && w.early {
		q.Reset = q.Reset.Add(time.Second)
	}
	if seq < w.newest {
		return // told already
	}
	if !q.Reset.After(now) && q.Remaining == 0 {
		// None left, and the window said to be over already: its reset
		// was rounded down (to the millisecond, or to "0s"), and the
		// host's window has not yet ended. The requests wait ResetGrace
		// before the next asks, rather than each meeting a 429 at once.
		q.Reset = now.Add(ResetGrace)
	}
	if !q.Reset.After(now) {
		if !w.known && w.probe == probeNone {
			// Of a window that is over: the next request learns the new
			// one. A probe already out is not replaced: each answer of
			// the old window would let one more request go unpaced.
			w.probe = probeDue
		}
		return
	}
	w.newest = seq
	// More admitted since than the server has left: others share the key,
	// and that many of the requests still waiting for their slot yield.
	w.over = max(0, w.admitted-seq-q.Remaining)
	left := max(0, q.Remaining-max(w.admitted-seq, w.admitted-w.answered))
	by := q.Reset
	if q.Coarse {
		by = q.Reset.Add(-min(time.Second, q.Reset.Sub(now)/2))
	}
	if w.known && now.Before(w.reset) && w.reset.Sub(q.Reset).Abs() <= time.Second {
		w.remaining = min(w.remaining, left)
		if q.Reset.Before(w.reset) {
			w.reset = q.Reset
		}
		if by.Before(w.by) {
			w.by = by
		}
		return
	}
	// A new window. The next slot of the old one, if it had one, is kept:
	// it is at most one of its spaces away.
	w.known, w.remaining, w.reset, w.by = true, left, q.Reset, by
}

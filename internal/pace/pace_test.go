package pace

import (
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// told is a Window that a response to its first admission told left
// requests until reset.
func told(left int64, reset time.Duration, coarse bool) *Window {
	w := &Window{}
	t, _ := w.Take(t0, false, 0)
	w.Tell(t0, t.Seq, Quota{Remaining: left, Reset: t0.Add(reset), Coarse: coarse})
	return w
}

func TestUnknownQuotaLetsEveryRequestGo(t *testing.T) {
	var w Window
	for i := range 3 {
		if turn, ok := w.Take(t0.Add(time.Duration(i)), false, 0); turn.Wait != 0 || turn.Held || !ok || turn.Seq != int64(i+1) {
			t.Fatalf("Take on an unknown quota: %+v ok %v", turn, ok)
		}
	}
}

// The requests left are spread over the time left, whatever the quota:
// n requests taken at once are given slots (reset-now)/n apart, and the
// last goes before the reset.
func TestTakeSpreadsTheRequestsLeft(t *testing.T) {
	for _, tc := range []struct {
		left   int64
		window time.Duration
	}{{1, time.Second}, {4, time.Second}, {60, time.Minute}, {5000, time.Hour}, {3, 10 * time.Millisecond}} {
		w := told(tc.left, tc.window, false)
		var last time.Duration
		for i := range tc.left {
			turn, ok := w.Take(t0, false, time.Hour)
			if !ok || turn.Held {
				t.Fatalf("left %d: request %d: %+v ok %v", tc.left, i, turn, ok)
			}
			if i > 0 && turn.Wait <= last {
				t.Fatalf("left %d: request %d waits %v, not after %v", tc.left, i, turn.Wait, last)
			}
			if turn.Wait >= tc.window {
				t.Fatalf("left %d: request %d waits %v, past the reset", tc.left, i, turn.Wait)
			}
			last = turn.Wait
		}
		if want := tc.window - tc.window/time.Duration(tc.left); (last - want).Abs() > time.Duration(tc.left) {
			t.Errorf("left %d over %v: the last waits %v, want about %v", tc.left, tc.window, last, want)
		}
		turn, ok := w.Take(t0, false, time.Hour)
		if !ok || !turn.Held || turn.Wait != tc.window || turn.Seq != 0 {
			t.Errorf("left %d: a request past the quota: %+v ok %v, want held to the reset %v", tc.left, turn, ok, tc.window)
		}
	}
}

// After a reset, one request goes first, and the others are held until
// its answer (or ProbeWait): a new window's quota is not known, and all
// of them at once could exceed it.
func TestAfterAResetOneProbeGoesFirst(t *testing.T) {
	for _, answer := range []string{"told", "answered", "lost"} {
		w := told(0, time.Second, false)
		at := t0.Add(time.Second)
		probe, ok := w.Take(at, false, time.Hour)
		if !ok || probe.Held || probe.Wait != 0 || w.Known() || !w.Probing() {
			t.Fatalf("%s: the first request past the reset: %+v ok %v known %v probing %v", answer, probe, ok, w.Known(), w.Probing())
		}
		for range 3 {
			turn, ok := w.Take(at, false, time.Hour)
			if !ok || !turn.Held || turn.Wait != ProbeWait {
				t.Fatalf("%s: a request while the probe is out: %+v ok %v, want held for ProbeWait", answer, turn, ok)
			}
		}
		if turn, ok := w.Take(at, false, 0); ok {
			t.Fatalf("%s: a request that may not wait, while the probe is out: %+v let go", answer, turn)
		}
		at = at.Add(10 * time.Millisecond)
		switch answer {
		case "told":
			w.Tell(at, probe.Seq, Quota{Remaining: 9, Reset: t0.Add(2 * time.Second)})
			if !w.Known() || w.remaining != 9 {
				t.Fatalf("told: known %v remaining %d", w.Known(), w.remaining)
			}
		case "answered":
			w.Answer(probe.Seq, false)
		case "lost":
			at = at.Add(ProbeWait)
		}
		if turn, ok := w.Take(at, false, time.Hour); !ok || turn.Held || w.Probing() {
			t.Errorf("%s: after the probe: %+v ok %v probing %v", answer, turn, ok, w.Probing())
		}
	}
}

// The answer of a request sent before the probe does not end its wait.
func TestAnEarlierAnswerDoesNotEndTheProbe(t *testing.T) {
	w := told(2, time.Second, false)
	before, _ := w.Take(t0, false, time.Hour)
	probe, _ := w.Take(t0.Add(time.Second), false, time.Hour)
	if !w.Probing() {
		t.Fatal("no probe")
	}
	w.Answer(before.Seq, false)
	if !w.Probing() {
		t.Fatal("an answer to a request admitted before the probe ended its wait")
	}
	w.Tell(t0.Add(time.Second), probe.Seq, Quota{Remaining: 5, Reset: t0.Add(2 * time.Second)})
	if w.Probing() {
		t.Fatal("the probe's answer did not end its wait")
	}
}

func TestCriticalIsNotSpread(t *testing.T) {
	w := told(10, time.Second, false)
	if turn, _ := w.Take(t0, false, time.Hour); turn.Wait != 0 {
		t.Fatalf("first wait %v", turn.Wait)
	}
	if turn, ok := w.Take(t0, true, time.Hour); turn.Wait != 0 || !ok {
		t.Fatalf("a critical request waits %v (ok %v)", turn.Wait, ok)
	}
	if turn, _ := w.Take(t0, false, time.Hour); turn.Wait <= 0 {
		t.Fatalf("the request after waits %v, want spread", turn.Wait)
	}
	w = told(0, time.Second, false)
	if turn, ok := w.Take(t0, true, time.Hour); turn.Wait != time.Second || !turn.Held || !ok {
		t.Errorf("a critical request on a spent quota: %+v ok %v, want held to the reset", turn, ok)
	}
}

// What a response says is less what it may not count: the requests
// admitted since, or, if more, those in flight (sent before, perhaps
// counted after). In one window, the fewest left and the earliest reset
// are kept; an older admission's response is ignored.
func TestTellErrsLowAndKeepsTheFewest(t *testing.T) {
	var w Window
	var seqs []int64
	for range 8 { // a burst while the quota is unknown
		turn, _ := w.Take(t0, false, time.Hour)
		seqs = append(seqs, turn.Seq)
	}
	w.Tell(t0, seqs[7], Quota{Remaining: 8, Reset: t0.Add(2 * time.Second)}) // counted second: six of the others not yet
	if w.remaining != 1 {
		t.Fatalf("the latest of a burst of 8, told 8 left: remaining %d, want 8 less the 7 in flight", w.remaining)
	}
	w.Tell(t0, seqs[6], Quota{Remaining: 100, Reset: t0.Add(2 * time.Second)}) // an older admission's
	if w.remaining != 1 {
		t.Fatalf("an older response changed the quota to %d", w.remaining)
	}
	turn, _ := w.Take(t0, false, time.Hour)
	w.Tell(t0.Add(100*time.Millisecond), turn.Seq, Quota{Remaining: 3, Reset: t0.Add(1500 * time.Millisecond)})
	if w.remaining != 0 || !w.reset.Equal(t0.Add(1500*time.Millisecond)) {
		t.Fatalf("the same window, said earlier: remaining %d reset %v", w.remaining, w.reset.Sub(t0))
	}
	for _, s := range seqs[:7] {
		w.Answer(s, false)
	}
	turn, _ = w.Take(t0.Add(200*time.Millisecond), false, time.Hour)
	if !turn.Held {
		t.Fatalf("a spent quota let a request go: %+v", turn)
	}
	w.Tell(t0.Add(200*time.Millisecond), w.admitted, Quota{Remaining: 50, Reset: t0.Add(2 * time.Second)}) // more, in the same window
	if w.remaining != 0 || !w.reset.Equal(t0.Add(1500*time.Millisecond)) {
		t.Fatalf("more left told in the same window: remaining %d reset %v, want the fewest and the earliest", w.remaining, w.reset.Sub(t0))
	}
	w.Tell(t0.Add(300*time.Millisecond), w.admitted, Quota{Remaining: -2, Reset: t0.Add(time.Minute)}) // a new window; a negative count is none
	if w.remaining != 0 || !w.reset.Equal(t0.Add(time.Minute)) {
		t.Fatalf("new window: remaining %d reset %v", w.remaining, w.reset.Sub(t0))
	}
	w.Tell(t0.Add(2*time.Minute), w.admitted, Quota{Remaining: 10, Reset: t0.Add(time.Minute)}) // of a window over
	if !w.reset.Equal(t0.Add(time.Minute)) || w.remaining != 0 {
		t.Fatal("a response about a window already over was read")
	}
}

// A request whose wait would pass maxWait is refused and moves nothing:
// the requests after it are spread as if it had not come.
func TestRefusalChangesNothing(t *testing.T) {
	for _, maxWait := range []time.Duration{0, time.Millisecond, 99 * time.Millisecond} {
		w, ref := told(10, time.Second, false), told(10, time.Second, false)
		w.Take(t0, false, time.Hour)
		ref.Take(t0, false, time.Hour)
		for range 5 {
			if turn, ok := w.Take(t0, false, maxWait); ok || turn.Wait <= maxWait {
				t.Fatalf("maxWait %v: a wait of %v let go (%v)", maxWait, turn.Wait, ok)
			}
		}
		if *w != *ref {
			t.Errorf("maxWait %v: refusals changed the window: %+v, want %+v", maxWait, *w, *ref)
		}
	}
	w := told(0, time.Minute, false)
	if turn, ok := w.Take(t0, true, 30*time.Second); ok || turn.Wait != time.Minute {
		t.Errorf("a spent quota a minute from its reset, maxWait 30 s: %+v ok %v", turn, ok)
	}
}

// A request given back is taken again; a slot at the reset is held for it.
func TestGiveBack(t *testing.T) {
	w := told(1, time.Second, false)
	turn, ok := w.Take(t0, false, time.Hour)
	if !ok {
		t.Fatal("refused")
	}
	w.Answer(turn.Seq, true)
	if w.remaining != 1 || w.answered != w.admitted {
		t.Fatalf("after a request given back: remaining %d, %d answered of %d", w.remaining, w.answered, w.admitted)
	}
	if turn, ok := w.Take(t0, false, time.Hour); !ok || !turn.Held || turn.Wait != time.Second || w.remaining != 1 {
		t.Errorf("after the give back, the next slot is the reset's: %+v ok %v remaining %d", turn, ok, w.remaining)
	}
}

// A reset told in whole seconds may be up to a second late: the requests
// left are spread to be sent a second before it (or, nearer than two
// seconds, by half the time left), and held after for the reset itself.
func TestCoarseResetIsSpreadBeforeIt(t *testing.T) {
	for _, window := range []time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second, 10 * time.Second} {
		w := told(10, window, true)
		by := window - min(time.Second, window/2)
		var last time.Duration
		for i := range 10 {
			turn, ok := w.Take(t0, false, time.Hour)
			if !ok || turn.Held || turn.Wait >= by {
				t.Fatalf("window %v: request %d: %+v ok %v, want sent before %v", window, i, turn, ok, by)
			}
			last = turn.Wait
		}
		if want := by - by/10; (last - want).Abs() > 10 {
			t.Errorf("window %v: the last of 10 waits %v, want %v", window, last, want)
		}
		if turn, _ := w.Take(t0, false, time.Hour); !turn.Held || turn.Wait != window {
			t.Errorf("window %v: the 11th: %+v, want held to the reset", window, turn)
		}
	}
}

// A host that rounds its resets down is found out by its first probe,
// answered with a reset already past, and its resets are read a second
// later from then on; one that rounds up is never read so.
func TestResetsRoundedDownAreFoundOut(t *testing.T) {
	w := told(0, time.Second, true) // told: the window resets at t0+1s
	at := t0.Add(time.Second)
	probe, _ := w.Take(at, false, time.Hour)
	// The host's window really ends at t0+1.6s: the probe meets it, told t0+1s.
	w.Tell(at.Add(20*time.Millisecond), probe.Seq, Quota{Remaining: 0, Reset: t0.Add(time.Second), Coarse: true})
	if !w.early {
		t.Fatal("a probe answered with a reset already past did not prove the resets early")
	}
	if turn, _ := w.Take(at.Add(30*time.Millisecond), false, time.Hour); w.Probing() || !turn.Held || turn.Wait != 970*time.Millisecond {
		t.Fatalf("after the probe: %+v probing %v, want held to t0+2s", turn, w.Probing())
	}
	turn, _ := w.Take(t0.Add(2*time.Second), false, time.Hour) // the next probe
	w.Tell(t0.Add(2*time.Second+20*time.Millisecond), turn.Seq, Quota{Remaining: 0, Reset: t0.Add(2 * time.Second), Coarse: true})
	if !w.reset.Equal(t0.Add(3 * time.Second)) {
		t.Errorf("a reset told t0+2s read as %v, want a second later", w.reset.Sub(t0))
	}

	up := told(0, time.Second, true)
	probe, _ = up.Take(at, false, time.Hour)
	up.Tell(at.Add(20*time.Millisecond), probe.Seq, Quota{Remaining: 59, Reset: t0.Add(2 * time.Second), Coarse: true})
	if up.early || !up.reset.Equal(t0.Add(2*time.Second)) {
		t.Errorf("a host rounding up: early %v, reset %v", up.early, up.reset.Sub(t0))
	}
}

// A response that shows more admitted since than the server has left
// (the key's other users took the room) makes that many of the requests
// still waiting for their slot yield when it comes.
func TestConfirmYieldsWhatOthersTook(t *testing.T) {
	w := told(10, 10*time.Second, false)
	var turns []Turn
	for range 5 {
		turn, _ := w.Take(t0, false, time.Hour)
		turns = append(turns, turn)
	}
	// The response to the first of the five: 2 left, with 4 admitted since.
	w.Tell(t0.Add(10*time.Millisecond), turns[0].Seq, Quota{Remaining: 2, Reset: t0.Add(10 * time.Second)})
	yielded := 0
	for _, turn := range turns[1:] {
		if !w.Confirm(turn.Seq) {
			yielded++
		}
	}
	if yielded != 2 {
		t.Errorf("%d of the 4 admitted since yielded, want the 2 the server has no room for", yielded)
	}
	if turn, _ := w.Take(t0.Add(20*time.Millisecond), false, time.Hour); !turn.Held {
		t.Errorf("a request after: %+v, want held for the reset", turn)
	}
	alone := told(10, 10*time.Second, false)
	a, _ := alone.Take(t0, false, time.Hour)
	b, _ := alone.Take(t0, false, time.Hour)
	alone.Tell(t0.Add(10*time.Millisecond), a.Seq, Quota{Remaining: 8, Reset: t0.Add(10 * time.Second)})
	if !alone.Confirm(b.Seq) {
		t.Error("a request the window has room for yielded")
	}
}

// Answers from the window that is over, arriving while the probe of the
// next is out, do not replace it: each would let one more request go
// before the new quota is known.
func TestOldAnswersDoNotReplaceTheProbe(t *testing.T) {
	for _, coarse := range []bool{false, true} {
		w := told(5, time.Second, coarse)
		var old []int64
		for range 3 {
			turn, _ := w.Take(t0, true, time.Minute)
			old = append(old, turn.Seq)
		}
		after := t0.Add(1100 * time.Millisecond)
		probe, _ := w.Take(after, false, time.Minute)
		if probe.Held || !w.Probing() {
			t.Fatalf("coarse %v: the first request after the reset is not the probe: %+v", coarse, probe)
		}
		for i, seq := range old {
			w.Tell(after, seq, Quota{Remaining: 0, Reset: t0.Add(time.Second), Coarse: coarse})
			if turn, _ := w.Take(after, false, time.Minute); !turn.Held {
				t.Fatalf("coarse %v: after %d answers of the old window, a request went while the probe was out: %+v", coarse, i+1, turn)
			}
		}
	}
}

// A shared Window its store dropped starts again from zero while
// requests it admitted are still out: their answers, numbered past
// anything the new Window admitted, count as a response's of a request
// it did not admit, and do not hide the answers of those it does.
func TestAnswersOfALostWindow(t *testing.T) {
	var w Window
	w.Answer(500, true)
	w.Tell(t0, 501, Quota{Remaining: 10, Reset: t0.Add(10 * time.Second)})
	if !w.Known() {
		t.Fatal("a response of a request admitted before the loss did not tell the quota")
	}
	turn, _ := w.Take(t0, true, time.Minute)
	w.Tell(t0.Add(time.Millisecond), turn.Seq, Quota{Remaining: 3, Reset: t0.Add(10 * time.Second)})
	if w.remaining != 3 {
		t.Fatalf("the response to a request the new Window admitted left %d, want 3: it was ignored", w.remaining)
	}
	if w.answered > w.admitted {
		t.Fatalf("answered %d of %d admitted", w.answered, w.admitted)
	}
}

// A response that says none are left with a reset already past (rounded
// down to the millisecond, or "0s", while the host's window has a moment
// to run) holds the requests ResetGrace, instead of letting each go at
// once as a new probe to meet a 429; in whole seconds or not.
func TestResetRoundedDownHoldsAMoment(t *testing.T) {
	for _, tc := range []struct {
		past   time.Duration // how far before now the reset was told
		coarse bool
	}{{0, false}, {500 * time.Microsecond, false}, {0, true}} {
		w := told(5, time.Second, tc.coarse)
		at := t0.Add(time.Second) // the reset told: the window is over for the client
		probe, _ := w.Take(at, false, time.Minute)
		w.Tell(at, probe.Seq, Quota{Remaining: 0, Reset: at.Add(-tc.past), Coarse: tc.coarse})
		for i := range 3 {
			turn, ok := w.Take(at, false, time.Minute)
			if !ok || !turn.Held || turn.Wait <= 0 || turn.Wait > time.Second+ResetGrace {
				t.Fatalf("reset %v past, coarse %v: request %d after the probe's 429: %+v ok %v; want held a moment", tc.past, tc.coarse, i+1, turn, ok)
			}
		}
	}
}

package pace

import (
	"reflect"
	"testing"
	"time"
)

// A Window decoded is the Window encoded, in every state the arithmetic
// reaches: unknown, told, probing, after a yield, with a host found to
// round down.
func TestEncodeRoundTrip(t *testing.T) {
	probing := told(3, time.Second, true)
	probing.Take(t0.Add(2*time.Second), false, time.Second)
	early := told(5, time.Second, true)
	turn, _ := early.Take(t0.Add(2*time.Second), false, time.Second)
	early.Tell(t0.Add(2*time.Second), turn.Seq, Quota{Remaining: 4, Reset: t0.Add(time.Second), Coarse: true})
	over := told(10, 10*time.Second, false)
	for range 4 {
		over.Take(t0, false, time.Minute)
	}
	over.Tell(t0, 1, Quota{Remaining: 0, Reset: t0.Add(10 * time.Second)})
	for name, w := range map[string]*Window{
		"zero":     {},
		"told":     told(60, time.Minute, false),
		"coarse":   told(7, 3*time.Second, true),
		"probing":  probing,
		"early":    early,
		"over":     over,
		"answered": func() *Window { w := told(4, time.Second, false); w.Answer(1, true); return w }(),
	} {
		b := w.Append(nil)
		var d Window
		if err := d.Decode(b); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !reflect.DeepEqual(normal(w), normal(&d)) {
			t.Fatalf("%s: decoded %+v, encoded %+v", name, d, *w)
		}
		// The decoded Window goes on as the original does.
		at := t0.Add(1500 * time.Millisecond)
		t1, ok1 := w.Take(at, false, time.Minute)
		t2, ok2 := d.Take(at, false, time.Minute)
		if t1 != t2 || ok1 != ok2 {
			t.Fatalf("%s: after decoding, Take gives %+v %v, the original %+v %v", name, t2, ok2, t1, ok1)
		}
	}
	if len(told(60, time.Minute, false).Append(nil)) > 64 {
		t.Fatal("an encoded Window is over 64 bytes")
	}
}

// normal strips the monotonic readings, which an encoding cannot keep.
func normal(w *Window) Window {
	c := *w
	for _, t := range []*time.Time{&c.reset, &c.by, &c.next, &c.probeEnd} {
		*t = t.Round(0)
		if !t.IsZero() {
			*t = t.Local()
		}
	}
	return c
}

// Bytes that are not a Window are an error, never a panic nor a Window
// with a negative count.
func FuzzDecode(f *testing.F) {
	f.Add(told(60, time.Minute, true).Append(nil))
	f.Add([]byte{})
	f.Add([]byte{encoding, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		var w Window
		if err := w.Decode(b); err != nil {
			if !reflect.DeepEqual(w, Window{}) {
				t.Fatal("a failed Decode changed the Window")
			}
			return
		}
		if w.remaining < 0 || w.over < 0 {
			t.Fatalf("decoded a negative count: %+v", w)
		}
		var again Window
		if err := again.Decode(w.Append(nil)); err != nil || !reflect.DeepEqual(normal(&w), normal(&again)) {
			t.Fatalf("re-encoding %+v gives %+v, %v", w, again, err)
		}
		w.Take(t0, false, time.Second)
	})
}

package pace

import (
	"encoding/binary"
	"errors"
	"time"
)

// encoding is the version byte of Append's form. A Window stored in
// another form (a process of another version sharing the store) decodes
// as an error, and its user starts from the zero Window: the next
// response tells the quota again.
const encoding = 1

// errEncoding is Decode's answer to bytes that are not a Window.
var errEncoding = errors.New("pace: not an encoded Window")

// Append appends w's state to b, for a store that several processes
// share (retryhttp.PacerStore): every field, so that the Window decoded
// is the one encoded, its times to the nanosecond.
func (w *Window) Append(b []byte) []byte {
	b = append(b, encoding, flag(w.known)|flag(w.early)<<1, byte(w.probe))
	for _, n := range [...]int64{w.remaining, w.admitted, w.answered, w.newest, w.probeSeq, w.over} {
		b = binary.AppendVarint(b, n)
	}
	for _, t := range [...]time.Time{w.reset, w.by, w.next, w.probeEnd} {
		b = binary.AppendVarint(b, unixNano(t))
	}
	return b
}

// Decode sets w to the state Append encoded in b.
func (w *Window) Decode(b []byte) error {
	if len(b) < 3 || b[0] != encoding || b[1] > 3 || probeState(b[2]) > probeOut {
		return errEncoding
	}
	d := Window{known: b[1]&1 != 0, early: b[1]&2 != 0, probe: probeState(b[2])}
	b = b[3:]
	for _, n := range [...]*int64{&d.remaining, &d.admitted, &d.answered, &d.newest, &d.probeSeq, &d.over} {
		v, k := binary.Varint(b)
		if k <= 0 {
			return errEncoding
		}
		*n, b = v, b[k:]
	}
	for _, t := range [...]*time.Time{&d.reset, &d.by, &d.next, &d.probeEnd} {
		v, k := binary.Varint(b)
		if k <= 0 {
			return errEncoding
		}
		if v != 0 {
			*t = time.Unix(0, v)
		}
		b = b[k:]
	}
	if len(b) != 0 || d.remaining < 0 || d.over < 0 {
		return errEncoding
	}
	*w = d
	return nil
}

func flag(b bool) byte {
	if b {
		return 1
	}
	return 0
}

// unixNano is t in nanoseconds since 1970, 0 for the zero Time (which
// no quota's time is).
func unixNano(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

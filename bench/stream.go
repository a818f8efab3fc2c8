package bench

import (
	"io"
	"net/http"
	"runtime"
	"runtime/metrics"
	"sync/atomic"
	"time"
)

// UploadSize is the streamed upload of the memory comparison.
const UploadSize = 64 << 20

// zeros yields n zero bytes without holding them.
type zeros struct{ left int64 }

func (z *zeros) Read(p []byte) (int, error) {
	if z.left <= 0 {
		return 0, io.EOF
	}
	n := min(int64(len(p)), z.left)
	clear(p[:n])
	z.left -= n
	return int(n), nil
}

func (z *zeros) Close() error { return nil }

// discardBase reads and discards the request body, as a server would,
// without keeping it.
type discardBase struct{ read atomic.Int64 }

func (d *discardBase) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		n, _ := io.Copy(io.Discard, r.Body)
		d.read.Add(n)
		r.Body.Close()
	}
	return &http.Response{StatusCode: 200, Header: http.Header{}, Body: http.NoBody, Request: r}, nil
}

// UploadMemory streams a 64 MiB body of known length and no GetBody through
// the library to a base that discards it, and reports the peak growth of
// the live heap during the call and the bytes allocated by it. A library
// that buffers the whole body shows both above 64 MiB.
func UploadMemory(l Lib) (peak, allocated uint64, sent int64, err error) {
	base := &discardBase{}
	rt := l.Wrap(base)
	req, _ := http.NewRequest("PUT", "http://mem.test/upload", nil)
	req.Body, req.ContentLength = &zeros{left: UploadSize}, UploadSize

	runtime.GC()
	samples := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(samples)
	baseHeap, baseAllocs := samples[0].Value.Uint64(), samples[1].Value.Uint64()
	var maxHeap atomic.Uint64
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
		t := time.NewTicker(200 * time.Microsecond)
		defer t.Stop()
		for {
			metrics.Read(s)
			if v := s[0].Value.Uint64(); v > maxHeap.Load() {
				maxHeap.Store(v)
			}
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	}()
	resp, err := rt.RoundTrip(req)
	if err == nil {
		resp.Body.Close()
	}
	close(stop)
	<-done
	metrics.Read(samples)
	if m := maxHeap.Load(); m > baseHeap {
		peak = m - baseHeap
	}
	return peak, samples[1].Value.Uint64() - baseAllocs, base.read.Load(), err
}

package bench

import "testing"

// TestStreamedUploadMemory: retryhttp streams a body over its buffer limit
// once instead of holding it; the others copy all 64 MiB into memory.
func TestStreamedUploadMemory(t *testing.T) {
	for _, l := range Libs() {
		peak, alloc, sent, err := UploadMemory(l)
		if err != nil {
			t.Fatalf("%s: %v", l.Name, err)
		}
		t.Logf("%-26s peak heap +%6.1f MiB, allocated %6.1f MiB, sent %d MiB", l.Name, mib(peak), mib(alloc), sent>>20)
		if sent != UploadSize {
			t.Errorf("%s sent %d bytes, want %d", l.Name, sent, UploadSize)
		}
		buffers := l.Name == "go-retryablehttp" || l.Name == "failsafehttp"
		if got := alloc >= UploadSize; got != buffers {
			t.Errorf("%s allocated %.1f MiB: buffers the body = %v, want %v", l.Name, mib(alloc), got, buffers)
		}
	}
}

func mib(b uint64) float64 { return float64(b) / (1 << 20) }

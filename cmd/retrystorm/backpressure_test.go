package main

import (
	"fmt"
	"testing"
	"time"
)

// The Pacer in virtual time, over quotas, window lengths, where the
// windows end in a second and which way the host rounds its resets: at
// most 1% of those sent are 429s (or one, the probe that finds out a
// host rounding its resets down), and at least 95% of the quota is
// served; except a window of one second whose end is off a second's
// boundary, which a reset in whole seconds cannot say, where the quota
// is kept and less of it served.
func TestPacerKeepsWithinQuotaInVirtualTime(t *testing.T) {
	for _, q := range []struct {
		n      int
		window time.Duration
	}{{10, time.Second}, {60, time.Second}, {20, 2 * time.Second}, {30, 5 * time.Second}, {100, 10 * time.Second}, {60, time.Minute}, {5000, time.Hour}} {
		for _, phase := range []time.Duration{0, 300 * time.Millisecond, 700 * time.Millisecond} {
			for _, floor := range []bool{false, true} {
				// One process, or 4 sharing one window, as through a
				// retryhttp.PacerStore.
				for _, processes := range []int{1, 4} {
					c := quotaConfig{quota: q.n, window: q.window, clients: 8, offered: 3, windows: 10, paced: true, phase: phase, floor: floor,
						processes: processes, shared: true}
					if q.window == time.Hour {
						c.windows = 2
					}
					for seed := range uint64(5) {
						name := fmt.Sprintf("%d per %v, ending %v into a second, rounded down %v, %d processes, seed %d", q.n, q.window, phase, floor, processes, seed+1)
						checkQuotaRun(t, name, c, runQuota(c, seed+1))
					}
				}
			}
		}
	}
}

// checkQuotaRun holds a run of TestPacerKeepsWithinQuotaInVirtualTime to
// its bars.
func checkQuotaRun(t *testing.T, name string, c quotaConfig, r quotaRun) {
	t.Helper()
	if r.tooMany > max(1, r.sent/100) { // one: the probe that finds out a host rounding down
		t.Errorf("%s: %d 429s of %d sent", name, r.tooMany, r.sent)
	}
	served := float64(r.served) / float64(c.quota*c.windows)
	want := 0.95
	if c.window == time.Second && c.phase == 300*time.Millisecond {
		want = 0.65
	}
	if served < want {
		t.Errorf("%s: served %.0f%% of the quota, want at least %.0f%%", name, 100*served, 100*want)
	}
	if r.refused != 0 {
		t.Errorf("%s: %d refused, none waits past MaxWait here", name, r.refused)
	}
}

// The Shedder's measured Retry-After in virtual time, over handler
// speeds and bursts: retries shed again at most half as often as with a
// fixed 1 s, critical requests served at the first attempt as often.
func TestMeasuredRetryAfterInVirtualTime(t *testing.T) {
	for _, latency := range []time.Duration{20 * time.Millisecond, 40 * time.Millisecond, 100 * time.Millisecond} {
		for _, burst := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second} {
			c := shedConfig{limit: 8, latency: latency, factor: 3, burst: burst, fixed: true}
			fixed := runShed(c, 1)
			c.fixed = false
			measured := runShed(c, 1)
			name := fmt.Sprintf("latency %v, burst %v", latency, burst)
			fr, mr := float64(fixed.reshed)/float64(fixed.retries), float64(measured.reshed)/float64(measured.retries)
			if mr > fr/2 {
				t.Errorf("%s: retries shed again %.0f%% measured, %.0f%% with 1 s", name, 100*mr, 100*fr)
			}
			if measured.criticalFirst < fixed.criticalFirst {
				t.Errorf("%s: critical served first %d measured, %d with 1 s", name, measured.criticalFirst, fixed.criticalFirst)
			}
			if measured.served < measured.requests {
				t.Errorf("%s: measured served %d of %d", name, measured.served, measured.requests)
			}
		}
	}
}

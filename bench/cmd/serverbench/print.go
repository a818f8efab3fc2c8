package main

import (
	"fmt"
	"io"
	"slices"
	"time"
)

// median of the rounds' values.
func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

func field(ss []sample, f func(sample) float64) []float64 {
	out := make([]float64, len(ss))
	for i, s := range ss {
		out[i] = f(s)
	}
	return out
}

func rps(s sample) float64 { return s.rps }
func p50(s sample) float64 { return float64(s.p50) }
func p99(s sample) float64 { return float64(s.p99) }

func trips(s sample) float64    { return s.trips }
func commands(s sample) float64 { return s.commands }

// spread is how far the rounds' throughputs lie apart, relative to their
// median: (max - min) / median.
func spread(ss []sample) float64 {
	xs := field(ss, rps)
	return (slices.Max(xs) - slices.Min(xs)) / median(xs)
}

func dur(ns float64) string {
	d := time.Duration(ns)
	switch {
	case d >= time.Millisecond:
		return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond))
	default:
		return fmt.Sprintf("%.1f µs", float64(d)/float64(time.Microsecond))
	}
}

// print writes the store's table: medians per level and variant, the
// middleware's ratios to its floor, and the rounds' spread.
func (r *report) print(w io.Writer) {
	fmt.Fprintf(w, "### %s\n\n", r.store)
	conc := "conc"
	if r.perProcess {
		conc = "conc per process"
		fmt.Fprintln(w, "req/s summed over the processes; p50 and p99 over all their requests.")
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "| %s | variant | req/s | p50 | p99 | vs floor (req/s, p50) | trips, cmds per op | spread |\n", conc)
	fmt.Fprintln(w, "| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
	var spreads []float64
	var newRatios, replayRatios, cachedRatios []float64
	for li, level := range r.levels {
		s := r.samples[li]
		for v := range nVariants {
			if len(s[v]) == 0 {
				continue // not run
			}
			ratio := ""
			floor := -1
			switch v {
			case vNew:
				floor = vFloorNew
			case vClaim, vReplay, vReplayCached:
				floor = vFloorRead
			}
			if floor >= 0 && len(s[floor]) > 0 {
				x := median(field(s[v], rps)) / median(field(s[floor], rps))
				ratio = fmt.Sprintf("%.2f×, %.2f×", x, median(field(s[v], p50))/median(field(s[floor], p50)))
				switch v {
				case vNew:
					newRatios = append(newRatios, x)
				case vReplay:
					replayRatios = append(replayRatios, x)
				case vReplayCached:
					cachedRatios = append(cachedRatios, x)
				}
			}
			sp := spread(s[v])
			spreads = append(spreads, sp)
			sent := "–"
			if t := median(field(s[v], trips)); t > 0 {
				sent = fmt.Sprintf("%.2f, %.2f", t, median(field(s[v], commands)))
			}
			fmt.Fprintf(w, "| %d | %s | %.0f | %s | %s | %s | %s | ±%.0f%% |\n", level, variantNames[v],
				median(field(s[v], rps)), dur(median(field(s[v], p50))), dur(median(field(s[v], p99))), ratio, sent, 50*sp)
		}
	}
	fmt.Fprintln(w)
	if len(newRatios) > 0 {
		fmt.Fprintf(w, "%s: new key at %.2f–%.2f× the raw 2-command floor's req/s across concurrency %v.\n", r.store, slices.Min(newRatios), slices.Max(newRatios), r.levels)
	}
	if len(replayRatios) > 0 {
		fmt.Fprintf(w, "%s: replay at %.2f–%.2f× the raw read's req/s across concurrency %v.\n", r.store, slices.Min(replayRatios), slices.Max(replayRatios), r.levels)
	}
	if len(cachedRatios) > 0 {
		fmt.Fprintf(w, "%s: replay cached at %.2f–%.2f× the raw read's req/s across concurrency %v.\n", r.store, slices.Min(cachedRatios), slices.Max(cachedRatios), r.levels)
	}
	fmt.Fprintf(w, "Noise: the rounds' req/s lay within ±%.0f%% of their median (median over cells), ±%.0f%% at worst.\n\n",
		50*median(spreads), 50*slices.Max(spreads))
}

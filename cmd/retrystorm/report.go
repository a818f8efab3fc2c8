package main

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"
)

// printTable writes one row per strategy.
func printTable(w io.Writer, rs []result) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "strategy\tcalls\tcalls/request\tpeak/100ms after recovery\tall done at\tsuccess\tgive-ups\t")
	for _, r := range rs {
		fmt.Fprintf(tw, "%s\t%d\t%.2f\t%d\t%s\t%.1f%%\t%s\t\n", r.strategy, r.calls, r.amplification(),
			r.peakAfterRecovery(), r.finished.Round(10*time.Millisecond), 100*r.successRate(), giveUps(r.giveUps))
	}
	tw.Flush()
}

func giveUps(m map[string]int) string {
	if len(m) == 0 {
		return "-"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

var sparks = []rune("▁▂▃▄▅▆▇█")

// sparkline draws load in at most width columns, scaled to top, each
// column the peak of the bins it covers so a spike is never averaged away.
func sparkline(load []int, bins, width, top int) string {
	if bins == 0 || top == 0 {
		return ""
	}
	per := max(1, (bins+width-1)/width)
	var b strings.Builder
	for i := 0; i < bins; i += per {
		peak := 0
		for j := i; j < min(i+per, len(load)); j++ {
			peak = max(peak, load[j])
		}
		if peak == 0 {
			b.WriteRune(' ')
			continue
		}
		b.WriteRune(sparks[min(len(sparks)-1, peak*len(sparks)/(top+1))])
	}
	return b.String()
}

// printSparklines writes each strategy's server load on one shared scale.
func printSparklines(w io.Writer, rs []result) {
	bins, top, name := 0, 0, 0
	for _, r := range rs {
		bins = max(bins, len(r.load))
		name = max(name, len(r.strategy))
		for _, v := range r.load {
			top = max(top, v)
		}
	}
	fmt.Fprintf(w, "server load per 100 ms (peak %d; each column %v):\n", top, time.Duration(max(1, (bins+59)/60))*binWidth)
	for _, r := range rs {
		fmt.Fprintf(w, "  %-*s |%s|\n", name, r.strategy, sparkline(r.load, bins, 60, top))
	}
}

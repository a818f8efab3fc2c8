// Command table reads `go test -bench` output and prints one Markdown row
// per workload and library: the median ns/op, B/op and allocs/op, and the
// time as a ratio to the bare base transport in the same workload.
// benchstat gives the confidence intervals; this gives the README table.
package main

import (
	"bufio"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

var line = regexp.MustCompile(`^Benchmark(\S+?)/(?:(body=\S+)/)?lib=(\S+?)(?:-\d+)?\s+\d+\s+(.*)$`)

type key struct{ workload, lib string }

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: table results/bench.txt")
		os.Exit(2)
	}
	f, err := os.Open(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer f.Close()
	samples := map[key]map[string][]float64{}
	var order []key
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		m := line.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		w := m[1]
		if m[2] != "" {
			w += " " + strings.TrimPrefix(m[2], "body=")
		}
		k := key{w, m[3]}
		if samples[k] == nil {
			samples[k] = map[string][]float64{}
			order = append(order, k)
		}
		fields := strings.Fields(m[4])
		for i := 0; i+1 < len(fields); i += 2 {
			if v, err := strconv.ParseFloat(fields[i], 64); err == nil {
				samples[k][fields[i+1]] = append(samples[k][fields[i+1]], v)
			}
		}
	}
	fmt.Println("| workload | library | ns/op | vs bare | B/op | allocs/op |")
	fmt.Println("| --- | --- | ---: | ---: | ---: | ---: |")
	for _, k := range order {
		s := samples[k]
		ratio := "-"
		if bare, ok := samples[key{k.workload, "bare"}]; ok && k.lib != "bare" {
			ratio = fmt.Sprintf("%.2f×", median(s["ns/op"])/median(bare["ns/op"]))
		}
		fmt.Printf("| %s | %s | %.0f | %s | %.0f | %.0f |\n", k.workload, k.lib, median(s["ns/op"]), ratio, median(s["B/op"]), median(s["allocs/op"]))
	}
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

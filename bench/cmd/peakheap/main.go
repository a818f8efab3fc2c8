// Command peakheap streams a 64 MiB upload of known length and no GetBody
// through each library and prints how much memory each one took for it.
package main

import (
	"fmt"
	"os"
	"text/tabwriter"

	"github.com/retryhttp/retryhttp/bench"
)

func main() {
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "library\tpeak heap growth\tbytes allocated\tbuffers the body?\t")
	for _, l := range bench.Libs() {
		peak, alloc, _, err := bench.UploadMemory(l)
		if err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", l.Name, err)
			os.Exit(1)
		}
		yes := "no"
		if alloc >= bench.UploadSize {
			yes = "yes"
		}
		fmt.Fprintf(tw, "%s\t%.1f MiB\t%.1f MiB\t%s\t\n", l.Name, float64(peak)/(1<<20), float64(alloc)/(1<<20), yes)
	}
	tw.Flush()
}

#!/usr/bin/env bash
# Side-by-side benchmarks: bare base transport, retryhttp (defaults, +metrics,
# +budget+breaker), go-retryablehttp and failsafehttp, in one run. Prints a
# benchstat table (medians, with each library's change against bare) and the
# peak heap of a 64 MiB streamed upload.
#   COUNT=10 BENCHTIME=500ms bench/run.sh
set -euo pipefail
cd "$(dirname "$0")"
count=${COUNT:-6}
benchtime=${BENCHTIME:-200ms}
mkdir -p results
out=results/bench.txt

echo "machine: $(go version), $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
echo "running: go test -bench . -count $count -benchtime $benchtime (results in bench/$out)"
go test -run '^$' -bench . -count "$count" -benchtime "$benchtime" . > "$out"
echo
go run golang.org/x/perf/cmd/benchstat@v0.0.0-20260908200009-22c9c6c9d4da -col /lib "$out"
echo
echo "64 MiB streamed upload (known length, no GetBody):"
go run ./cmd/peakheap
echo
echo "README table (medians):"
go run ./cmd/table "$out"

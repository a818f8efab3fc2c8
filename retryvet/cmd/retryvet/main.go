// Command retryvet reports retries that can repeat a side effect (see
// package retryvet). Run it alone, retryvet ./..., or under go vet:
//
//	go install github.com/retryhttp/retryhttp/retryvet/cmd/retryvet@latest
//	go vet -vettool=$(command -v retryvet) ./...
package main

import (
	"golang.org/x/tools/go/analysis/singlechecker"

	"github.com/retryhttp/retryhttp/retryvet"
)

func main() { singlechecker.Main(retryvet.Analyzer) }

package retryvet_test

import (
	"testing"

	"golang.org/x/tools/go/analysis/analysistest"

	"github.com/retryhttp/retryhttp/retryvet"
)

// Each pattern reported where it is (unsafe_retries, sdk_stacked), and
// nothing where the code is safe (safe_retries).
func TestAnalyzer(t *testing.T) {
	analysistest.Run(t, analysistest.TestData(), retryvet.Analyzer, "unsafe_retries", "safe_retries", "sdk_stacked")
}

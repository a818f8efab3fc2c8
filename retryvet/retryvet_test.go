package retryvet_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/tools/go/analysis/analysistest"

	"github.com/retryhttp/retryhttp/retryvet"
)

// The test packages build against the real libraries, at the versions
// testdata/mod/go.mod states (go-retryablehttp v0.7.8, resty v2.17.2 and
// resty.dev/v3 v3.0.0-rc.4, failsafe-go v0.9.8, stripe-go v82.5.1,
// aws-sdk-go-v2 config v1.33.18, openai-go v3.98.0, anthropic-sdk-go v2.16.0,
// cenkalti/backoff v2.2.1, v3.2.2, v4.3.0 and v5.0.3, avast/retry-go v3.0.0
// and v4.7.0, sethvargo/go-retry v0.5.0, Rican7/retry v0.3.1,
// eapache/go-resiliency v1.7.0, PuerkitoBio/rehttp v1.4.0, gojek/heimdall
// v7.0.3, gopkg.in/resty.v1 v1.12.0), so a rule keyed on a
// method the library lacks does not compile, and one that fires only on a
// stub cannot pass. analysistest loads them with GOPROXY=off: download
// them first.
func testdata(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(analysistest.TestData(), "mod")
	cmd := exec.Command("go", "mod", "download")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go mod download in %s: %v\n%s", dir, err, out)
	}
	return dir
}

// Each pattern reported where it is (unsafe_retries, sdk_stacked), and
// nothing where the code is safe (the safe_ packages).
func TestAnalyzer(t *testing.T) {
	analysistest.Run(t, testdata(t), retryvet.Analyzer,
		"./sdk_plain_client", "./forward/...", "./unsafe_retries", "./unsafe_resty_v2", "./unsafe_standard_client", "./unsafe_checkretry", "./safe_retries", "./sdk_stacked",
		"./safe_resty_condition", "./safe_resty_keyed", "./safe_resty_zero", "./safe_v2_gets",
		"./safe_retrymax_zero", "./safe_ignored", "./safe_checkretry_method", "./safe_retry_helper",
		"./unsafe_helpers", "./safe_helpers", "./helpers/...", "./unsafe_any_method", "./safe_any_method", "./safe_any_method_keyed",
		"./safe_checkretry_optin", "./unsafe_checkretry_5xx", "./unsafe_rehttp", "./safe_rehttp", "./safe_vendor_keys", "./custom_key_header", "./safe_paced", "./unsafe_nowait", "./safe_nowait", "./behind/...", "./unsafe_resty_v1", "./unsafe_heimdall", "./safe_heimdall", "./safe_heimdall_keyed")
}

// With -show-ignored, a finding a directive silences is reported with
// the directive's reason.
func TestShowIgnored(t *testing.T) {
	dir := testdata(t)
	if err := retryvet.Analyzer.Flags.Set("show-ignored", "true"); err != nil {
		t.Fatal(err)
	}
	defer retryvet.Analyzer.Flags.Set("show-ignored", "false")
	analysistest.Run(t, dir, retryvet.Analyzer, "./ignored_shown")
}

// -key-headers names the headers a server dedupes on: with the API's own
// header added, the loop that sets it is keyed; a request ID still is not.
func TestKeyHeadersFlag(t *testing.T) {
	dir := testdata(t)
	if err := retryvet.Analyzer.Flags.Set("key-headers", retryvet.DefaultKeyHeaders+",X-Dedupe-Token"); err != nil {
		t.Fatal(err)
	}
	defer retryvet.Analyzer.Flags.Set("key-headers", retryvet.DefaultKeyHeaders)
	results := analysistest.Run(&silent{t}, dir, retryvet.Analyzer, "./custom_key_header")
	var lines []int
	for _, r := range results {
		for _, d := range r.Diagnostics {
			lines = append(lines, r.Pass.Fset.Position(d.Pos).Line)
		}
	}
	src, err := os.ReadFile(filepath.Join(dir, "custom_key_header", "c.go"))
	if err != nil {
		t.Fatal(err)
	}
	traced := 1 + strings.Count(string(src[:strings.Index(string(src), "func traced")]), "\n")
	if len(lines) != 1 || lines[0] <= traced {
		t.Fatalf("findings on lines %v; want only the request ID's loop (after line %d)", lines, traced)
	}
}

// silent is a testing.T whose Errorf is dropped: analysistest.Run's
// want comments are written for the flags' defaults, and this test reads
// its results instead.
type silent struct{ *testing.T }

func (s *silent) Errorf(string, ...any) {}

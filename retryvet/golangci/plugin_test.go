package golangci_test

import (
	"bytes"
	"encoding/json"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/golangci/plugin-module-register/register"

	"github.com/retryhttp/retryhttp/retryvet"
	_ "github.com/retryhttp/retryhttp/retryvet/golangci"
)

// The plugin is registered under the name .golangci.yml gives it, builds
// retryvet, and sets its flag from the settings.
func TestRegistered(t *testing.T) {
	newPlugin, err := register.GetPlugin("retryvet")
	if err != nil {
		t.Fatal(err)
	}
	p, err := newPlugin(map[string]any{"show-ignored": true, "key-headers": []any{"Idempotency-Key", "X-Dedupe-Token"}})
	if err != nil {
		t.Fatal(err)
	}
	as, err := p.BuildAnalyzers()
	if err != nil {
		t.Fatal(err)
	}
	defer retryvet.Analyzer.Flags.Set("show-ignored", "false")
	defer retryvet.Analyzer.Flags.Set("key-headers", retryvet.DefaultKeyHeaders)
	if len(as) != 1 || as[0] != retryvet.Analyzer {
		t.Fatalf("analyzers = %v, want retryvet's alone", as)
	}
	if got := retryvet.Analyzer.Flags.Lookup("show-ignored").Value.String(); got != "true" {
		t.Errorf("show-ignored = %s, want true from the settings", got)
	}
	if got := retryvet.Analyzer.Flags.Lookup("key-headers").Value.String(); got != "Idempotency-Key,X-Dedupe-Token" {
		t.Errorf("key-headers = %s, want the settings'", got)
	}
	if got := retryvet.Analyzer.Flags.Lookup("key-fields").Value.String(); got != retryvet.DefaultKeyFields {
		t.Errorf("key-fields = %s, want the default where the settings name none", got)
	}
	if p.GetLoadMode() != register.LoadModeTypesInfo {
		t.Errorf("load mode = %q, want %q: the rules read types", p.GetLoadMode(), register.LoadModeTypesInfo)
	}
	if _, err := newPlugin(map[string]any{"show-ignore": true}); err == nil {
		t.Error("a misspelt setting was accepted")
	}
}

// A golangci-lint built as golangci-lint custom builds it from
// example/.custom-gcl.yml (the release's source with the plugin's import
// added and the retryvet module replaced by this one), run with
// example/.golangci.yml, reports retryvet's finding and exits non-zero;
// the finding a directive silences is not reported. golangci-lint custom
// clones the release from its repository; this test takes the same
// source from the module cache, since the tests reach no other network.
func TestGolangciLintCustomBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("builds golangci-lint: not in -short")
	}
	custom, err := os.ReadFile("example/.custom-gcl.yml")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^version: (v\S+)`).FindSubmatch(custom)
	if m == nil {
		t.Fatal("example/.custom-gcl.yml names no golangci-lint version")
	}
	version := string(m[1])
	for _, want := range []string{"module: github.com/retryhttp/retryhttp/retryvet", "import: github.com/retryhttp/retryhttp/retryvet/golangci"} {
		if !bytes.Contains(custom, []byte(want)) {
			t.Fatalf("example/.custom-gcl.yml lacks %q", want)
		}
	}
	env := append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod", "GOTOOLCHAIN=local")
	run := func(dir string, name string, args ...string) []byte {
		t.Helper()
		cmd := exec.Command(name, args...)
		cmd.Dir, cmd.Env = dir, env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
		return out
	}

	var mod struct{ Dir string }
	if err := json.Unmarshal(run(".", "go", "mod", "download", "-json", "github.com/golangci/golangci-lint/v2@"+version), &mod); err != nil {
		t.Fatal(err)
	}
	src := filepath.Join(t.TempDir(), "golangci-lint")
	if err := os.CopyFS(src, os.DirFS(mod.Dir)); err != nil {
		t.Fatal(err)
	}
	filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error { // the module cache's files are read-only
		if err == nil {
			os.Chmod(p, 0o755)
		}
		return err
	})
	plugins := "package main\n\nimport _ \"github.com/retryhttp/retryhttp/retryvet/golangci\"\n"
	if err := os.WriteFile(filepath.Join(src, "cmd", "golangci-lint", "plugins.go"), []byte(plugins), 0o644); err != nil {
		t.Fatal(err)
	}
	retryvetDir, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	run(src, "go", "mod", "edit", "-replace", "github.com/retryhttp/retryhttp/retryvet="+retryvetDir)
	run(src, "go", "mod", "tidy")
	bin := filepath.Join(t.TempDir(), "custom-gcl")
	// Built without the compiler's optimisations: the binary lints one
	// small package, and its build, the slowest step of this module's tests
	// on a fresh machine, takes a third less time.
	run(src, "go", "build", "-trimpath", "-gcflags=all=-N -l", "-o", bin, "./cmd/golangci-lint")

	config, err := filepath.Abs("example/.golangci.yml")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "run", "-c", config, "./...")
	cmd.Dir = filepath.Join("testdata", "app")
	cmd.Env = append(env, "GOLANGCI_LINT_CACHE="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if _, failed := err.(*exec.ExitError); !failed {
		t.Fatalf("custom-gcl run: %v, want a non-zero exit for the finding\n%s", err, out)
	}
	if !bytes.Contains(out, []byte("app.go:16:")) || !bytes.Contains(out, []byte("POST retried by this loop without an Idempotency-Key")) || !bytes.Contains(out, []byte("(retryvet)")) {
		t.Errorf("custom-gcl run did not report the unkeyed POST at app.go:16 as retryvet's:\n%s", out)
	}
	if bytes.Contains(out, []byte("app.go:30:")) {
		t.Errorf("custom-gcl run reported the call //retryvet:ignore silences:\n%s", out)
	}
}

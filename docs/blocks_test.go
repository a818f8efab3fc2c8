package docs

import (
	"bytes"
	"flag"
	"fmt"
	"go/ast"
	"go/format"
	"go/parser"
	"go/token"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite blocks.go from the Markdown files")

// The Markdown files whose Go code blocks must compile, relative to this
// directory.
var sources = []string{"../README.md", "MIGRATING.md", "client.md", "exactly-once.md", "server.md", "testing.md"}

// imports are the packages a block may name, by the name it uses.
var imports = map[string]string{
	"bytes":         "bytes",
	"context":       "context",
	"http":          "net/http",
	"slog":          "log/slog",
	"strings":       "strings",
	"testing":       "testing",
	"time":          "time",
	"prometheus":    "github.com/prometheus/client_golang/prometheus",
	"redis":         "github.com/redis/go-redis/v9",
	"pgx":           "github.com/jackc/pgx/v5",
	"pgxpool":       "github.com/jackc/pgx/v5/pgxpool",
	"retryablehttp": "github.com/hashicorp/go-retryablehttp",
	"failsafehttp":  "github.com/failsafe-go/failsafe-go/failsafehttp",
	"stripe":        "github.com/stripe/stripe-go/v82",
	"retryhttp":     "github.com/retryhttp/retryhttp",
	"idempotency":   "github.com/retryhttp/retryhttp/idempotency",
	"overload":      "github.com/retryhttp/retryhttp/overload",
	"retryhttptest": "github.com/retryhttp/retryhttp/retryhttptest",
	"redisstore":    "github.com/retryhttp/retryhttp/idempotency/redisstore",
	"redispacer":    "github.com/retryhttp/retryhttp/redispacer",
	"pgstore":       "github.com/retryhttp/retryhttp/idempotency/pgstore",
	"mysqlstore":    "github.com/retryhttp/retryhttp/idempotency/mysqlstore",
	"sql":           "database/sql",
	"outbox":        "github.com/retryhttp/retryhttp/outbox",
	"natsjs":        "github.com/retryhttp/retryhttp/queue/natsjs",
	"jetstream":     "github.com/nats-io/nats.go/jetstream",
	"rabbitmq":      "github.com/retryhttp/retryhttp/queue/rabbitmq",
	"amqp":          "github.com/rabbitmq/amqp091-go",
	"natsoutbox":    "github.com/retryhttp/retryhttp/outbox/natsoutbox",
	"kafkaoutbox":   "github.com/retryhttp/retryhttp/outbox/kafkaoutbox",
	"kafka":         "github.com/retryhttp/retryhttp/queue/kafka",
	"kgo":           "github.com/twmb/franz-go/pkg/kgo",
	"sqsoutbox":     "github.com/retryhttp/retryhttp/outbox/sqsoutbox",
	"sqs":           "github.com/retryhttp/retryhttp/queue/sqs",
	"awssqs":        "github.com/aws/aws-sdk-go-v2/service/sqs",
	"river":         "github.com/riverqueue/river",
	"riverpgxv5":    "github.com/riverqueue/river/riverdriver/riverpgxv5",
	"rivertype":     "github.com/riverqueue/river/rivertype",
	"riverjob":      "github.com/retryhttp/retryhttp/queue/riverjob",
	"rabbitoutbox":  "github.com/retryhttp/retryhttp/outbox/rabbitoutbox",
	"dynamostore":   "github.com/retryhttp/retryhttp/idempotency/dynamostore",
	"dynamodb":      "github.com/aws/aws-sdk-go-v2/service/dynamodb",
	"config":        "github.com/aws/aws-sdk-go-v2/config",
	"lambda":        "github.com/aws/aws-lambda-go/lambda",
	"httpadapter":   "github.com/awslabs/aws-lambda-go-api-proxy/httpadapter",
}

// Every Go code block of the docs is in blocks.go, so that building this
// package compiles them all; this test fails when blocks.go no longer
// says what the Markdown does (go test -run TestBlocks -update rewrites
// it).
//
// A block is either declarations (it starts with func) or statements,
// which become a function's body. The variables a block assumes are named
// in an HTML comment just before it: <!-- given: mux *http.ServeMux;
// key string -->. In a block, "{ ... }" stands for code left out and a
// line "..." for lines left out; "// before" and "// after" start
// separate scopes.
func TestBlocks(t *testing.T) {
	got, err := render()
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile("blocks.go", got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile("blocks.go")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("blocks.go is not what the Markdown files say: run go test -run TestBlocks -update in docs/")
	}
}

var (
	fence   = regexp.MustCompile("(?s)(?:<!-- given: ([^>]*?) -->\\s*\\n)?```go\\n(.*?)```")
	elided  = regexp.MustCompile(`\{ \.\.\. \}`)
	scopeAt = regexp.MustCompile(`(?m)^// (before|after)\n`)
)

func render() ([]byte, error) {
	var decls, funcs []string
	for _, src := range sources {
		md, err := os.ReadFile(src)
		if err != nil {
			return nil, err
		}
		name := strings.TrimSuffix(filepath.Base(src), ".md")
		name = strings.NewReplacer("-", "", "README", "readme", "MIGRATING", "migrating").Replace(name)
		for i, m := range fence.FindAllSubmatch(md, -1) {
			given, code := string(m[1]), string(m[2])
			code = elided.ReplaceAllString(code, "{}")
			code = strings.ReplaceAll(code, "\n...\n", "\n")
			if strings.HasPrefix(code, "func ") {
				decls = append(decls, fmt.Sprintf("// %s, block %d\n%s", src, i+1, code))
				continue
			}
			for j, part := range scopeAt.Split(code, -1) {
				if strings.TrimSpace(part) == "" {
					continue
				}
				body, err := statements(given, part)
				if err != nil {
					return nil, fmt.Errorf("%s, block %d: %w", src, i+1, err)
				}
				funcs = append(funcs, fmt.Sprintf("// %s, block %d\nfunc %s%d_%d() {\n%s}\n", src, i+1, name, i+1, j, body))
			}
		}
	}
	all := strings.Join(append(decls, funcs...), "\n")
	used, err := packagesNamed(all)
	if err != nil {
		return nil, err
	}
	var b strings.Builder
	b.WriteString("// Code generated by go test -run TestBlocks -update; DO NOT EDIT.\n\n")
	b.WriteString("// Package docs holds the Go code blocks of the README and the docs, so\n// that building it compiles them.\npackage docs\n\nimport (\n")
	for _, name := range used {
		p := imports[name]
		if path.Base(p) != name { // a major version, or a package named otherwise than its directory
			fmt.Fprintf(&b, "\t%s %q\n", name, p)
			continue
		}
		fmt.Fprintf(&b, "\t%q\n", p)
	}
	b.WriteString(")\n\n")
	b.WriteString(all)
	return format.Source([]byte(b.String()))
}

// statements is a block of statements as a function body: the given
// variables declared first, and each variable the block defines at its
// top level used at the end, as the reader's code would go on to.
func statements(given, code string) (string, error) {
	var b strings.Builder
	for _, g := range strings.Split(given, ";") {
		if g = strings.TrimSpace(g); g != "" {
			fmt.Fprintf(&b, "var %s\n", g)
		}
	}
	b.WriteString(code)
	f, err := parser.ParseFile(token.NewFileSet(), "", "package p\nfunc _() {\n"+b.String()+"}\n", 0)
	if err != nil {
		return "", err
	}
	var defined []string
	for _, s := range f.Decls[0].(*ast.FuncDecl).Body.List {
		switch s := s.(type) {
		case *ast.AssignStmt:
			if s.Tok == token.DEFINE {
				for _, l := range s.Lhs {
					if id := l.(*ast.Ident); id.Name != "_" && !slices.Contains(defined, id.Name) {
						defined = append(defined, id.Name)
					}
				}
			}
		case *ast.DeclStmt:
			for _, sp := range s.Decl.(*ast.GenDecl).Specs {
				if vs, ok := sp.(*ast.ValueSpec); ok {
					for _, id := range vs.Names {
						defined = append(defined, id.Name)
					}
				}
			}
		}
	}
	for _, d := range defined {
		fmt.Fprintf(&b, "_ = %s\n", d)
	}
	return b.String(), nil
}

// packagesNamed returns the names of the packages code uses, in the order
// of their import paths.
func packagesNamed(code string) ([]string, error) {
	f, err := parser.ParseFile(token.NewFileSet(), "", "package p\n"+code, parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	var paths []string
	ast.Inspect(f, func(n ast.Node) bool {
		if sel, ok := n.(*ast.SelectorExpr); ok {
			if id, ok := sel.X.(*ast.Ident); ok {
				if _, ok := imports[id.Name]; ok && !slices.Contains(paths, id.Name) {
					paths = append(paths, id.Name)
				}
			}
		}
		return true
	})
	slices.SortFunc(paths, func(a, b string) int { return strings.Compare(imports[a], imports[b]) })
	return paths, nil
}

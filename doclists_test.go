package retryhttp

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"strings"
	"testing"
)

// packageDocs parses the package's own files (tests left out) and returns
// the doc comment of each declaration by name ("Transport.RoundTrip" for a
// method, "EventGiveUp" for a constant), the package's comment included
// as "package", and the fields of each struct type by name.
func packageDocs(t *testing.T) (docs map[string]string, fields map[string][]string) {
	t.Helper()
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, ".", func(fi fs.FileInfo) bool {
		return !strings.HasSuffix(fi.Name(), "_test.go")
	}, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	docs, fields = map[string]string{}, map[string][]string{}
	for _, f := range pkgs["retryhttp"].Files {
		if f.Doc != nil {
			docs["package"] += f.Doc.Text()
		}
		// Every comment of a file counts for the names declared in it: a
		// block of constants keeps its members' docs inside the block.
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				name := d.Name.Name
				if d.Recv != nil {
					typ := d.Recv.List[0].Type
					if s, ok := typ.(*ast.StarExpr); ok {
						typ = s.X
					}
					name = typ.(*ast.Ident).Name + "." + name
				}
				docs[name] = d.Doc.Text()
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						docs[s.Name.Name] = d.Doc.Text() + s.Doc.Text()
						if st, ok := s.Type.(*ast.StructType); ok {
							for _, fl := range st.Fields.List {
								for _, n := range fl.Names {
									fields[s.Name.Name] = append(fields[s.Name.Name], n.Name)
								}
							}
						}
					case *ast.ValueSpec:
						for _, n := range s.Names {
							docs[n.Name] = s.Doc.Text() + s.Comment.Text()
						}
					}
				}
			}
		}
	}
	return docs, fields
}

// The docs that list the brakes or the give-up reasons list them all: a
// brake is a field of gate, and each is named in the order RoundTrip's
// doc gives, in EventGiveUp's doc and (those that may refuse a first
// send) in the Metrics doc; every Reason
// that GaveUp is in the Metrics doc's give_ups_total list and in
// Reason's; and the client guide's decision order and list of give-ups
// agree. A brake or a reason added without its docs fails here.
func TestDocListsAreWhole(t *testing.T) {
	docs, fields := packageDocs(t)
	// The Transport field each of gate's brakes is configured by.
	brakeField := map[string]string{"budget": "Budget", "circuit": "Breaker", "throttle": "Throttle", "limit": "Limit", "pace": "Pacer"}
	for _, f := range fields["gate"] {
		if f == "k" {
			continue // the Throttle's K, not a brake of its own
		}
		name, ok := brakeField[f]
		if !ok {
			t.Errorf("gate has a brake %q this test does not know: add it to brakeField and to the docs below", f)
			continue
		}
		where := []string{"Transport.RoundTrip", "EventGiveUp"}
		if f != "budget" { // asked before a retry alone: the others may refuse a first send, which Metrics' doc explains
			where = append(where, "Metrics")
		}
		for _, where := range where {
			if !strings.Contains(docs[where], name) {
				t.Errorf("%s's doc does not name the %s among the brakes", where, name)
			}
		}
	}
	if rt := docs["Transport.RoundTrip"]; !(strings.Index(rt, "BeforeAttempt") < strings.Index(rt, "Pacer") && strings.Index(rt, "Pacer") < strings.Index(rt, "Limit") &&
		strings.Index(rt, "Limit") < strings.Index(rt, "Throttle") && strings.Index(rt, "Throttle") < strings.Index(rt, "Breaker")) {
		t.Errorf("RoundTrip's doc does not give the gate's order (BeforeAttempt, Pacer, Limit, Throttle, Breaker): %q", rt)
	}
	for r := ReasonNone; r < numReasons; r++ {
		if !r.GaveUp() {
			continue
		}
		for _, where := range []string{"Metrics", "Reason"} {
			if !strings.Contains(docs[where], r.String()) {
				t.Errorf("%s's doc does not list the give-up %q", where, r)
			}
		}
	}
	// The client guide's lists, from the same sources.
	guide, err := os.ReadFile("docs/client.md")
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Join(strings.Fields(string(guide)), " ")
	section := func(from, to string) string {
		i := strings.Index(text, from)
		if i < 0 {
			t.Fatalf("docs/client.md has no %q", from)
		}
		j := strings.Index(text[i:], to)
		if j < 0 {
			t.Fatalf("docs/client.md has no %q after %q", to, from)
		}
		return text[i : i+j]
	}
	order := section("**Decision order**", "the Budget")
	if !(strings.Index(order, "BeforeAttempt") < strings.Index(order, "Pacer") && strings.Index(order, "Pacer") < strings.Index(order, "limit") && strings.Index(order, "limit") < strings.Index(order, "Throttle") &&
		strings.Index(order, "Throttle") < strings.Index(order, "Breaker")) {
		t.Errorf("docs/client.md's decision order is not the gate's (BeforeAttempt, the Pacer, the limit, the Throttle, the Breaker): %q", order)
	}
	giveUps := section("Every give-up (", ")")
	for r := ReasonNone; r < numReasons; r++ {
		if r.GaveUp() && !strings.Contains(giveUps, r.String()) {
			t.Errorf("docs/client.md's list of give-ups lacks %q: %q", r, giveUps)
		}
	}
}

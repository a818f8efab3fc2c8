package retryvet

import (
	"go/ast"
	"go/constant"
	"go/token"
	"go/types"
	"maps"
	"slices"
	"strings"
)

// A loop that never waits, or one whose send sits behind a call of the
// code's own, is a retry by what it does with the send's outcome: it goes
// round again when the send fails and leaves when it succeeds. A batch
// loop goes on whatever the outcome; a poller or a flusher that waits goes
// on after a success too. These are the tests that tell them apart.

// outcome is what a condition tests of a send's results.
type outcome int

const (
	neither   outcome = iota
	succeeded         // err == nil, a 2xx status, !shouldRetry(resp, err)
	failed            // err != nil, a 5xx or 429, shouldRetry(resp, err)
)

func (o outcome) not() outcome {
	switch o {
	case succeeded:
		return failed
	case failed:
		return succeeded
	}
	return neither
}

// resultsOf returns the variables body assigns the results of calls
// (resp, err := c.Do(req); err = op()).
func (c *checker) resultsOf(body ast.Node, calls []*ast.CallExpr) map[types.Object]bool {
	results := map[types.Object]bool{}
	of := func(lhs []ast.Expr, rhs []ast.Expr) {
		if len(rhs) != 1 {
			return
		}
		call, ok := ast.Unparen(rhs[0]).(*ast.CallExpr)
		if !ok {
			return
		}
		for _, s := range calls {
			if s != call {
				continue
			}
			for _, l := range lhs {
				if obj := c.objectOf(l); obj != nil {
					results[obj] = true
				}
			}
		}
	}
	ast.Inspect(body, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.AssignStmt:
			of(n.Lhs, n.Rhs)
		case *ast.ValueSpec:
			lhs := make([]ast.Expr, len(n.Names))
			for i, id := range n.Names {
				lhs[i] = id
			}
			of(lhs, n.Values)
		}
		return true
	})
	return results
}

// outcomeOf returns what cond tests of a send whose results are results:
// its error against nil, its response's StatusCode against a constant, a
// call that reads them and says whether to retry (shouldRetry,
// isRetryable, isTemporary), and their negations and conjunctions.
func (c *checker) outcomeOf(cond ast.Expr, results map[types.Object]bool) outcome {
	switch e := ast.Unparen(cond).(type) {
	case *ast.UnaryExpr:
		if e.Op == token.NOT {
			return c.outcomeOf(e.X, results).not()
		}
	case *ast.CallExpr:
		fn := c.callee(e)
		if fn == nil || !c.refersTo(e, results) {
			return neither
		}
		name := strings.ToLower(fn.Name())
		if strings.Contains(name, "retr") || strings.Contains(name, "temporar") || strings.Contains(name, "transient") {
			return failed
		}
	case *ast.BinaryExpr:
		switch e.Op {
		case token.LAND, token.LOR:
			l, r := c.outcomeOf(e.X, results), c.outcomeOf(e.Y, results)
			switch {
			case l == failed || r == failed:
				return failed // err != nil || status >= 500; err == nil && status >= 500
			case l == succeeded || r == succeeded:
				return succeeded
			}
		case token.EQL, token.NEQ:
			if o := c.errTest(e); o != neither {
				return o
			}
			return c.statusTest(e, results)
		case token.LSS, token.LEQ, token.GTR, token.GEQ:
			return c.statusTest(e, results)
		}
	}
	return neither
}

// errTest returns what err == nil or err != nil says of a send, for an
// error the send returned.
func (c *checker) errTest(e *ast.BinaryExpr) outcome {
	x, y := ast.Unparen(e.X), ast.Unparen(e.Y)
	if isNil(c.pass.TypesInfo, x) {
		x, y = y, x
	}
	if !isNil(c.pass.TypesInfo, y) || !types.Identical(c.pass.TypesInfo.TypeOf(x), types.Universe.Lookup("error").Type()) {
		return neither
	}
	if e.Op == token.EQL {
		return succeeded
	}
	return failed
}

// statusTest returns what a comparison of a response's StatusCode with a
// constant says: below 400 (or below 500 and up) is a success, 400 and
// above, or not a 2xx, a failure.
func (c *checker) statusTest(e *ast.BinaryExpr, results map[types.Object]bool) outcome {
	x, y, op := ast.Unparen(e.X), ast.Unparen(e.Y), e.Op
	if _, ok := constInt(c.pass.TypesInfo, x); ok {
		x, y = y, x
		switch op {
		case token.LSS:
			op = token.GTR
		case token.GTR:
			op = token.LSS
		case token.LEQ:
			op = token.GEQ
		case token.GEQ:
			op = token.LEQ
		}
	}
	sel, ok := x.(*ast.SelectorExpr)
	if !ok || sel.Sel.Name != "StatusCode" || !c.refersTo(sel.X, results) {
		return neither
	}
	n, ok := constInt(c.pass.TypesInfo, y)
	if !ok {
		return neither
	}
	switch op {
	case token.EQL:
		if n < 400 {
			return succeeded
		}
		return failed
	case token.NEQ:
		if n < 300 {
			return failed
		}
	case token.LSS:
		if n <= 500 {
			return succeeded
		}
	case token.LEQ:
		if n < 500 {
			return succeeded
		}
	case token.GEQ:
		if n >= 300 {
			return failed
		}
	case token.GTR:
		if n >= 299 {
			return failed
		}
	}
	return neither
}

func isNil(info *types.Info, e ast.Expr) bool {
	tv, ok := info.Types[e]
	return ok && tv.IsNil()
}

// repeatsOnFailure reports whether a loop whose sends' results are
// results goes round again when a send fails and leaves when it
// succeeds: its condition tests for a failure (for err != nil), an if
// that tests for a success leaves the loop (if err == nil { return resp
// }), or one that tests for a failure goes round again (if err != nil {
// continue }) before the loop body leaves on its own (return resp).
func (c *checker) repeatsOnFailure(loop ast.Node, loopBody *ast.BlockStmt, results map[types.Object]bool) bool {
	if len(results) == 0 {
		return false
	}
	if f, ok := loop.(*ast.ForStmt); ok && f.Cond != nil && c.outcomeOf(f.Cond, results) == failed {
		return true
	}
	exitsAfter := false // the body leaves the loop on its own, at its top level
	for _, s := range loopBody.List {
		switch s := s.(type) {
		case *ast.ReturnStmt:
			exitsAfter = true
		case *ast.BranchStmt:
			exitsAfter = exitsAfter || s.Tok == token.BREAK
		}
	}
	found := false
	inspectLoop(loopBody, func(ifs *ast.IfStmt) {
		switch c.outcomeOf(ifs.Cond, results) {
		case succeeded:
			found = found || leaves(ifs.Body.List) || exitsAfter && goesOn(ifs.Else)
		case failed:
			found = found || exitsAfter && goesOn(ifs.Body) || ifs.Else != nil && leavesStmt(ifs.Else)
		}
	})
	return found
}

// recursesOnFailure reports whether fd calls itself (self) where a send's
// results (results) say it failed, with the same request: if err != nil {
// return f(req, n+1) }. A call given what it made of the response (a
// redirect's Location) sends another request.
func (c *checker) recursesOnFailure(fd *ast.FuncDecl, results map[types.Object]bool) bool {
	if len(results) == 0 {
		return false
	}
	fromResponse := c.derived(fd.Body, results)
	found := false
	calls := func(n ast.Node) bool {
		return n != nil && c.callsSelf(n, fromResponse)
	}
	inspectLoop(fd.Body, func(ifs *ast.IfStmt) {
		switch c.outcomeOf(ifs.Cond, results) {
		case failed:
			found = found || calls(ifs.Body)
		case succeeded:
			found = found || ifs.Else != nil && calls(ifs.Else)
		}
	})
	return found
}

// callsSelf reports whether n calls c.self with no argument but an error
// made of other (the objects derived from a response).
func (c *checker) callsSelf(n ast.Node, other map[types.Object]bool) bool {
	errType := types.Universe.Lookup("error").Type()
	found := false
	ast.Inspect(n, func(n ast.Node) bool {
		if _, ok := n.(*ast.FuncLit); ok {
			return false
		}
		call, ok := n.(*ast.CallExpr)
		if !ok || c.self == nil || c.callee(call) != c.self {
			return !found
		}
		found = !slices.ContainsFunc(call.Args, func(a ast.Expr) bool {
			return !types.Identical(c.pass.TypesInfo.TypeOf(a), errType) && c.refersTo(a, other)
		})
		return !found
	})
	return found
}

// derived returns seeds and the variables body assigns from them, however
// indirectly, counting a variable whose address a call is given with one
// of them (errors.As(err, &rerr)).
func (c *checker) derived(body ast.Node, seeds map[types.Object]bool) map[types.Object]bool {
	out := maps.Clone(seeds)
	add := func(e ast.Expr) bool {
		if obj := c.objectOf(e); obj != nil && !out[obj] {
			out[obj] = true
			return true
		}
		return false
	}
	for grew := true; grew; {
		grew = false
		ast.Inspect(body, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.AssignStmt:
				if slices.ContainsFunc(n.Rhs, func(e ast.Expr) bool { return c.refersTo(e, out) }) {
					for _, l := range n.Lhs {
						r := root(l)
						if obj := c.objectOf(r); r != l && (obj == nil || obj.Pos() < body.Pos() || obj.Pos() >= body.End()) {
							continue // a field of a receiver or a parameter: not made here
						}
						if add(r) { // newReq.URL = location: newReq too
							grew = true
						}
					}
				}
			case *ast.ValueSpec:
				if slices.ContainsFunc(n.Values, func(e ast.Expr) bool { return c.refersTo(e, out) }) {
					for _, id := range n.Names {
						if add(id) {
							grew = true
						}
					}
				}
			case *ast.CallExpr:
				if !c.refersTo(n, out) {
					return true
				}
				for _, a := range n.Args {
					if u, ok := ast.Unparen(a).(*ast.UnaryExpr); ok && u.Op == token.AND && add(ast.Unparen(u.X)) {
						grew = true
					}
				}
			}
			return true
		})
	}
	return out
}

// inspectLoop calls f for each if statement in body that belongs to the
// loop whose body it is: not one of a function literal's, nor of a loop
// nested in it.
func inspectLoop(body *ast.BlockStmt, f func(*ast.IfStmt)) {
	ast.Inspect(body, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.FuncLit, *ast.ForStmt, *ast.RangeStmt:
			return false
		case *ast.IfStmt:
			f(n)
		}
		return true
	})
}

// leaves reports whether stmts leave the loop around them: a return, a
// break of the loop (not of a switch or select in it), a labelled break.
func leaves(stmts []ast.Stmt) bool {
	for _, s := range stmts {
		if leavesStmt(s) {
			return true
		}
	}
	return false
}

func leavesStmt(s ast.Stmt) bool {
	found := false
	var walk func(n ast.Node, inner bool) bool
	walk = func(n ast.Node, inner bool) bool {
		switch n := n.(type) {
		case *ast.FuncLit:
			return false
		case *ast.ReturnStmt:
			found = true
		case *ast.BranchStmt:
			if n.Tok == token.BREAK && (n.Label != nil || !inner) {
				found = true
			}
		case *ast.ForStmt, *ast.RangeStmt, *ast.SwitchStmt, *ast.TypeSwitchStmt, *ast.SelectStmt:
			ast.Inspect(n, func(m ast.Node) bool {
				if m == n {
					return true
				}
				return walk(m, true)
			})
			return false
		}
		return !found
	}
	ast.Inspect(s, func(n ast.Node) bool { return walk(n, false) })
	return found
}

// goesOn reports whether s (an if's body or else) ends with a continue.
func goesOn(s ast.Stmt) bool {
	b, ok := s.(*ast.BlockStmt)
	if !ok || len(b.List) == 0 {
		return false
	}
	br, ok := b.List[len(b.List)-1].(*ast.BranchStmt)
	return ok && br.Tok == token.CONTINUE
}

// constValue returns e's constant value, or that of a local variable
// every assignment in body gives the same constant (method :=
// http.MethodPost; var localVarHTTPMethod = http.MethodPost).
func (c *checker) constValue(body ast.Node, e ast.Expr) (constant.Value, bool) {
	if tv, ok := c.pass.TypesInfo.Types[e]; ok && tv.Value != nil {
		return tv.Value, true
	}
	id, ok := ast.Unparen(e).(*ast.Ident)
	if !ok {
		return nil, false
	}
	obj, ok := c.pass.TypesInfo.ObjectOf(id).(*types.Var)
	if !ok || obj.IsField() || obj.Parent() == c.pass.Pkg.Scope() {
		return nil, false
	}
	var v constant.Value
	same := true
	set := func(rhs ast.Expr) {
		tv, ok := c.pass.TypesInfo.Types[rhs]
		switch {
		case !ok || tv.Value == nil:
			same = false
		case v == nil:
			v = tv.Value
		case !constant.Compare(v, token.EQL, tv.Value):
			same = false
		}
	}
	ast.Inspect(body, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.AssignStmt:
			for i, l := range n.Lhs {
				if lid, ok := l.(*ast.Ident); ok && c.pass.TypesInfo.ObjectOf(lid) == obj {
					if len(n.Rhs) != len(n.Lhs) || n.Tok != token.DEFINE && n.Tok != token.ASSIGN {
						same = false
					} else {
						set(n.Rhs[i])
					}
				}
			}
		case *ast.ValueSpec:
			for i, name := range n.Names {
				if c.pass.TypesInfo.ObjectOf(name) == obj && len(n.Values) == len(n.Names) {
					set(n.Values[i])
				}
			}
		case *ast.UnaryExpr:
			if n.Op == token.AND {
				if xid, ok := ast.Unparen(n.X).(*ast.Ident); ok && c.pass.TypesInfo.ObjectOf(xid) == obj {
					same = false // its address escapes
				}
			}
		}
		return same
	})
	return v, same && v != nil
}

// root returns the variable an assignment's left side writes to or into
// (x for x, x.f, x[i], *x).
func root(e ast.Expr) ast.Expr {
	for {
		switch x := ast.Unparen(e).(type) {
		case *ast.SelectorExpr:
			e = x.X
		case *ast.IndexExpr:
			e = x.X
		case *ast.StarExpr:
			e = x.X
		default:
			return x
		}
	}
}

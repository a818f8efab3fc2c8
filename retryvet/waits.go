package retryvet

import (
	"go/ast"
	"go/types"
	"strings"
)

// waits reports whether a call of fn waits before it returns: the
// functions time.Sleep, time.After, time.NewTimer and time.Tick do (not
// the method time.Time.After), and so does a function of the package
// that calls one of them or another such function (an SDK's
// WaitForDelay(ctx, d)), or one of another package of the module that
// does and sends nothing (a codebase's backoff.Sleep). A loop that sends and calls it waits between its
// attempts, as one that sleeps does.
func (c *checker) waits(fn *types.Func) bool {
	if pkgPath(fn) == "time" {
		if isMethod(fn) {
			return false // time.Time's After compares; it waits for nothing
		}
		switch fn.Name() {
		case "Sleep", "After", "NewTimer", "Tick":
			return true
		}
		return false
	}
	if fn.Pkg() != c.pass.Pkg {
		// Of the code's own module only: a library's function (net/http's
		// Post, a client's Do) may wait on a timer of its own, which is
		// no wait between a loop's attempts.
		return c.inModule(fn.Pkg()) && c.pass.ImportObjectFact(fn, new(waitsFact))
	}
	return c.waiting[fn]
}

// inModule reports whether p is in the module of the package under
// analysis; false where the driver does not say which module that is.
func (c *checker) inModule(p *types.Package) bool {
	m := c.pass.Module
	if m == nil || m.Path == "" || p == nil {
		return false
	}
	return p.Path() == m.Path || strings.HasPrefix(p.Path(), m.Path+"/")
}

// waitsFact is the fact of a function that waits before it returns (see
// waits), so that a loop in another package that calls it waits too: a
// codebase's backoff.Sleep(ctx, attempt) in a package of its own.
type waitsFact struct{}

// AFact marks waitsFact as an analysis fact.
func (*waitsFact) AFact() {}

func (*waitsFact) String() string { return "waits" }

// waiters finds the package's functions that wait.
func (c *checker) waiters(decls []*ast.FuncDecl) {
	c.waiting = map[*types.Func]bool{}
	c.untilFixed(decls, func(fn *types.Func) bool { return c.waiting[fn] }, func(fd *ast.FuncDecl, fn *types.Func) bool {
		ast.Inspect(fd.Body, func(n ast.Node) bool {
			if _, ok := n.(*ast.FuncLit); ok || c.waiting[fn] {
				return false
			}
			if call, ok := n.(*ast.CallExpr); ok {
				if callee := c.callee(call); callee != nil && c.waits(callee) {
					c.waiting[fn] = true
				}
			}
			return !c.waiting[fn]
		})
		return c.waiting[fn]
	})
	c.iterWaiting = map[*types.Func]bool{}
	for _, fd := range decls {
		fn, ok := c.pass.TypesInfo.Defs[fd.Name].(*types.Func)
		if !ok || fd.Body == nil || !returnsIterator(fn) {
			continue
		}
		ast.Inspect(fd.Body, func(n ast.Node) bool { // function literals too: the iterator is one
			if call, ok := n.(*ast.CallExpr); ok {
				if callee := c.callee(call); callee != nil && c.waits(callee) {
					c.iterWaiting[fn] = true
				}
			}
			return !c.iterWaiting[fn]
		})
		if c.iterWaiting[fn] && fn.Exported() {
			c.pass.ExportObjectFact(fn, &iterWaitsFact{})
		}
	}
	// Other packages learn of the waits that send nothing: a wait helper
	// (backoff.Sleep(ctx, attempt)), not a client whose Do waits between
	// its own retries, whose callers' loops may send each time anew.
	for _, fd := range decls {
		if fn, ok := c.pass.TypesInfo.Defs[fd.Name].(*types.Func); ok && c.waiting[fn] && fn.Exported() && fd.Body != nil && len(c.sends(fd.Body)) == 0 {
			c.pass.ExportObjectFact(fn, &waitsFact{})
		}
	}
}

// iterWaitsFact is the fact of a function that returns an iterator that
// waits (see rangesOverWaits), so that a range over it in another package
// waits too.
type iterWaitsFact struct{}

// AFact marks iterWaitsFact as an analysis fact.
func (*iterWaitsFact) AFact() {}

func (*iterWaitsFact) String() string { return "returns an iterator that waits" }

// returnsIterator reports whether fn returns an iterator: a function
// whose one parameter is a yield function that returns a bool (an
// iter.Seq, an iter.Seq2).
func returnsIterator(fn *types.Func) bool {
	res := fn.Type().(*types.Signature).Results()
	if res.Len() != 1 {
		return false
	}
	seq, ok := types.Unalias(res.At(0).Type()).Underlying().(*types.Signature)
	if !ok || seq.Params().Len() != 1 || seq.Results().Len() != 0 {
		return false
	}
	yield, ok := types.Unalias(seq.Params().At(0).Type()).Underlying().(*types.Signature)
	return ok && yield.Results().Len() == 1 && types.Identical(yield.Results().At(0).Type(), types.Typ[types.Bool])
}

// rangesOverWaits reports whether loop ranges over a function (an
// iterator) that a call returns and that waits between the values it
// yields, so the loop waits between its passes:
//
//	for attempt := range retry.Attempts(ctx, 5) { ... }
func (c *checker) rangesOverWaits(loop ast.Node) bool {
	r, ok := loop.(*ast.RangeStmt)
	if !ok {
		return false
	}
	call, ok := ast.Unparen(r.X).(*ast.CallExpr)
	if !ok {
		return false
	}
	fn := c.callee(call)
	if fn == nil || !returnsIterator(fn) {
		return false
	}
	if fn.Pkg() == c.pass.Pkg {
		return c.iterWaiting[fn]
	}
	return c.pass.ImportObjectFact(fn, new(iterWaitsFact))
}

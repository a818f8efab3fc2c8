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
	// Other packages learn of the waits that send nothing: a wait helper
	// (backoff.Sleep(ctx, attempt)), not a client whose Do waits between
	// its own retries, whose callers' loops may send each time anew.
	for _, fd := range decls {
		if fn, ok := c.pass.TypesInfo.Defs[fd.Name].(*types.Func); ok && c.waiting[fn] && fn.Exported() && fd.Body != nil && len(c.sends(fd.Body)) == 0 {
			c.pass.ExportObjectFact(fn, &waitsFact{})
		}
	}
}

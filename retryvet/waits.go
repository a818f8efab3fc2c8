package retryvet

import (
	"go/ast"
	"go/types"
)

// waits reports whether a call of fn waits before it returns: the
// functions time.Sleep, time.After, time.NewTimer and time.Tick do (not
// the method time.Time.After), and so does a function of
// the package that calls one of them or another such function (an SDK's
// WaitForDelay(ctx, d)). A loop that sends and calls it waits between its
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
	return c.waiting[fn]
}

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
}

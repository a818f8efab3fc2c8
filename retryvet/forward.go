package retryvet

import (
	"fmt"
	"go/ast"
	"go/types"
)

// retriedMethod is the fact of a function that forwards its parameter
// Param, a method, into a request go-retryablehttp retries without an
// Idempotency-Key: an SDK's request builder, called with http.MethodPost
// from files or packages away. A call that passes it POST or PATCH is
// reported where the constant is.
type retriedMethod struct {
	Param int    // the index of the method parameter
	Via   string // the function that sends it, for the report
}

// AFact marks retriedMethod as an analysis fact.
func (*retriedMethod) AFact() {}

func (f *retriedMethod) String() string {
	return fmt.Sprintf("retries its parameter %d as a method (%s)", f.Param, f.Via)
}

// forwarders finds the package's functions that forward a method
// parameter into a retried request, directly or through another such
// function, and exports their facts.
func (c *checker) forwarders(decls []*ast.FuncDecl) {
	c.untilFixed(decls, func(fn *types.Func) bool { return c.pass.ImportObjectFact(fn, new(retriedMethod)) },
		func(fd *ast.FuncDecl, fn *types.Func) bool {
			if c.setsKey(fd.Body) {
				return false // the builder keys its requests
			}
			i, ok := c.forwardedParam(fd)
			if ok {
				c.pass.ExportObjectFact(fn, &retriedMethod{Param: i, Via: fn.Name()})
			}
			return ok
		})
}

// untilFixed asks find about each function of decls not yet found, round
// after round while a round finds one: what a function does may follow
// from what another it calls does.
func (c *checker) untilFixed(decls []*ast.FuncDecl, found func(*types.Func) bool, find func(*ast.FuncDecl, *types.Func) bool) {
	for changed := true; changed; {
		changed = false
		for _, fd := range decls {
			fn, _ := c.pass.TypesInfo.Defs[fd.Name].(*types.Func)
			if fn != nil && fd.Body != nil && !found(fn) && find(fd, fn) {
				changed = true
			}
		}
	}
}

// forwardedParam returns the index of fd's parameter that reaches a
// retried request as its method.
func (c *checker) forwardedParam(fd *ast.FuncDecl) (int, bool) {
	params := c.paramIndex(fd)
	found, index := false, 0
	ast.Inspect(fd.Body, func(n ast.Node) bool {
		if _, ok := n.(*ast.FuncLit); ok || found {
			return false
		}
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		arg, ok := c.methodArg(call)
		if !ok {
			return true
		}
		id, ok := ast.Unparen(arg).(*ast.Ident)
		if !ok {
			return true
		}
		if i, ok := params[c.pass.TypesInfo.ObjectOf(id)]; ok {
			found, index = true, i
		}
		return !found
	})
	return index, found
}

// methodArg returns the argument of call that is a retried request's
// method: retryablehttp.NewRequest's (in a package whose CheckRetry and
// RetryMax leave POSTs retried), or a forwarding function's.
func (c *checker) methodArg(call *ast.CallExpr) (ast.Expr, bool) {
	fn := c.callee(call)
	if fn == nil {
		return nil, false
	}
	switch {
	case pkgPath(fn) == pathRetryablehttp && (fn.Name() == "NewRequest" || fn.Name() == "NewRequestWithContext"):
		if c.checkRetrySet || c.retryMaxZero {
			return nil, false
		}
		i := 0
		if fn.Name() == "NewRequestWithContext" {
			i = 1
		}
		if len(call.Args) > i {
			return call.Args[i], true
		}
	default:
		var f retriedMethod
		if c.pass.ImportObjectFact(fn, &f) && len(call.Args) > f.Param {
			return call.Args[f.Param], true
		}
	}
	return nil, false
}

// paramIndex maps fd's parameters to their positions.
func (c *checker) paramIndex(fd *ast.FuncDecl) map[types.Object]int {
	out := map[types.Object]int{}
	i := 0
	for _, field := range fd.Type.Params.List {
		if len(field.Names) == 0 {
			i++
			continue
		}
		for _, name := range field.Names {
			out[c.pass.TypesInfo.ObjectOf(name)] = i
			i++
		}
	}
	return out
}

// forwardedCall reports a call that passes POST or PATCH to a forwarding
// function of another file or package, from a function that sets no key.
func (c *checker) forwardedCall(call *ast.CallExpr, keyed bool) {
	fn := c.callee(call)
	if fn == nil || keyed || pkgPath(fn) == pathRetryablehttp {
		return
	}
	var f retriedMethod
	if !c.pass.ImportObjectFact(fn, &f) || len(call.Args) <= f.Param {
		return
	}
	if m, ok := c.method(call, f.Param); ok && unsafeMethod(m) {
		c.report(call.Args[f.Param].Pos(), "%s sent through %s, which go-retryablehttp retries without an Idempotency-Key: a retry after a lost response repeats its effect; "+
			"fix: set an Idempotency-Key on the request (one per operation), in %s or before it sends", m, fn.Name(), f.Via)
	}
}

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
	params := c.paramsOf(fd)
	found, index := false, 0
	ast.Inspect(fd.Body, func(n ast.Node) bool {
		if _, ok := n.(*ast.FuncLit); ok || found {
			return false
		}
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		if arg, ok := c.methodArg(call); ok {
			index, found = params.of(arg)
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

// params are a function's parameters, by object, with their positions.
type params struct {
	info  *types.Info
	index map[types.Object]int
}

// paramsOf returns fd's parameters.
func (c *checker) paramsOf(fd *ast.FuncDecl) params { return c.paramsOfType(fd.Type) }

// paramsOfType returns the parameters of a function of type ft.
func (c *checker) paramsOfType(ft *ast.FuncType) params {
	p := params{info: c.pass.TypesInfo, index: map[types.Object]int{}}
	i := 0
	for _, field := range ft.Params.List {
		if len(field.Names) == 0 {
			i++
			continue
		}
		for _, name := range field.Names {
			p.index[c.pass.TypesInfo.ObjectOf(name)] = i
			i++
		}
	}
	return p
}

// of returns the position of the parameter e names, if it names one.
func (p params) of(e ast.Expr) (int, bool) {
	id, ok := ast.Unparen(e).(*ast.Ident)
	if !ok {
		return 0, false
	}
	i, ok := p.index[p.info.ObjectOf(id)]
	return i, ok
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

// sendsThrough is the fact of a function that sends its request parameter
// Request through its *http.Client parameter Client, directly or through
// another such function (an SDK's DoRequestWithClient(ctx, client, req)):
// a go-retryablehttp StandardClient() passed to it retries the request as
// its own Do would, and the call is checked as that Do is.
type sendsThrough struct {
	Client, Request int // the indexes of the parameters
}

// AFact marks sendsThrough as an analysis fact.
func (*sendsThrough) AFact() {}

func (f *sendsThrough) String() string {
	return fmt.Sprintf("sends its parameter %d through its client %d", f.Request, f.Client)
}

// senders finds the package's functions that send a request parameter
// through a client parameter, and exports their facts.
func (c *checker) senders(decls []*ast.FuncDecl) {
	c.untilFixed(decls, func(fn *types.Func) bool { return c.pass.ImportObjectFact(fn, new(sendsThrough)) },
		func(fd *ast.FuncDecl, fn *types.Func) bool {
			params := c.paramsOf(fd)
			var f *sendsThrough
			ast.Inspect(fd.Body, func(n ast.Node) bool {
				if _, ok := n.(*ast.FuncLit); ok || f != nil {
					return false
				}
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				client, req, ok := c.sentThrough(call)
				if !ok {
					return true
				}
				ci, okc := params.of(client)
				ri, okr := params.of(req)
				if okc && okr {
					f = &sendsThrough{Client: ci, Request: ri}
				}
				return f == nil
			})
			if f != nil {
				c.pass.ExportObjectFact(fn, f)
			}
			return f != nil
		})
}

// sentThrough returns the client and the request of a call that sends a
// request through a client: an *http.Client's Do, or a call of a function
// with the sendsThrough fact.
func (c *checker) sentThrough(call *ast.CallExpr) (client, req ast.Expr, ok bool) {
	fn := c.callee(call)
	if fn == nil {
		return nil, nil, false
	}
	if pkgPath(fn) == "net/http" && fn.Name() == "Do" && isMethod(fn) && len(call.Args) == 1 {
		if sel, ok := ast.Unparen(call.Fun).(*ast.SelectorExpr); ok && isNamed(c.pass.TypesInfo.TypeOf(sel.X), "net/http", "Client") {
			return sel.X, call.Args[0], true
		}
		return nil, nil, false
	}
	var f sendsThrough
	if c.pass.ImportObjectFact(fn, &f) && len(call.Args) > max(f.Client, f.Request) {
		return call.Args[f.Client], call.Args[f.Request], true
	}
	return nil, nil, false
}

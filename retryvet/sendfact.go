package retryvet

import (
	"fmt"
	"go/ast"
	"go/constant"
	"go/types"
	"strings"
)

// A retry around an SDK's method repeats what the method sends, though no
// send is in sight where the retry is: backoff.Retry(ctx, func() error {
// _, err := client.CreateUser(ctx, u); return err }). Two facts follow a
// request's method from where it is named to where it is sent, across
// functions and packages: requestFact for the functions that build a
// request, sendsFact for those that send one.

// requestFact is the fact of a function that returns an *http.Request it
// builds with net/http's NewRequest (or another such function): with the
// method Method, or, when Method is empty, the one its string parameter
// Param names (a generated SDK's prepareRequest(ctx, path, method, ...)).
type requestFact struct {
	Method string
	Param  int
}

// AFact marks requestFact as an analysis fact.
func (*requestFact) AFact() {}

func (f *requestFact) String() string {
	if f.Method != "" {
		return "builds a " + f.Method + " request"
	}
	return fmt.Sprintf("builds a request of its parameter %d's method", f.Param)
}

// sendsFact is the fact of a function that sends a POST or PATCH with no
// key header set in it or anywhere in its package: Method, or, when
// Method is empty, the method its string parameter Param names. Via is
// the function, for the report.
type sendsFact struct {
	Method string
	Param  int
	Via    string
}

// AFact marks sendsFact as an analysis fact.
func (*sendsFact) AFact() {}

func (f *sendsFact) String() string {
	if f.Method != "" {
		return "sends a " + f.Method + " (" + f.Via + ")"
	}
	return fmt.Sprintf("sends a request of its parameter %d's method (%s)", f.Param, f.Via)
}

// methodFrom is a request's method as a function body knows it: a
// constant, or the parameter it comes from (param >= 0).
type methodFrom struct {
	method string
	param  int
}

// methodIn returns what body knows of the method e, a request's method
// argument: its constant (through a local variable too), or the
// parameter of params it names.
func (c *checker) methodIn(body *ast.BlockStmt, p params, e ast.Expr) (methodFrom, bool) {
	if v, ok := c.constValue(body, e); ok && v.Kind() == constant.String {
		return methodFrom{method: strings.ToUpper(constant.StringVal(v)), param: -1}, true
	}
	if i, ok := p.of(e); ok {
		return methodFrom{param: i}, true
	}
	return methodFrom{}, false
}

// builtMethod returns the method of the request call makes, when call is
// net/http's NewRequest or NewRequestWithContext or a call of a function
// with requestFact.
func (c *checker) builtMethod(body *ast.BlockStmt, p params, call *ast.CallExpr) (methodFrom, bool) {
	fn := c.callee(call)
	if fn == nil {
		return methodFrom{}, false
	}
	if pkgPath(fn) == "net/http" || pkgPath(fn) == pathRetryablehttp {
		switch {
		case fn.Name() == "NewRequest" && len(call.Args) >= 2:
			return c.methodIn(body, p, call.Args[0])
		case fn.Name() == "NewRequestWithContext" && len(call.Args) >= 3:
			return c.methodIn(body, p, call.Args[1])
		}
		return methodFrom{}, false
	}
	var f requestFact
	if !c.pass.ImportObjectFact(fn, &f) {
		return methodFrom{}, false
	}
	if f.Method != "" {
		return methodFrom{method: f.Method, param: -1}, true
	}
	if len(call.Args) > f.Param {
		return c.methodIn(body, p, call.Args[f.Param])
	}
	return methodFrom{}, false
}

// requestMethodIn returns what body knows of the method of the request
// expr names: the request a variable is assigned from a builder.
func (c *checker) requestMethodIn(body *ast.BlockStmt, p params, expr ast.Expr) (methodFrom, bool) {
	id, ok := ast.Unparen(expr).(*ast.Ident)
	if !ok {
		return methodFrom{}, false
	}
	obj := c.pass.TypesInfo.ObjectOf(id)
	var m methodFrom
	found := false
	ast.Inspect(body, func(n ast.Node) bool {
		if found {
			return false
		}
		as, ok := n.(*ast.AssignStmt)
		if !ok || len(as.Rhs) != 1 || len(as.Lhs) == 0 {
			return true
		}
		if lid, ok := as.Lhs[0].(*ast.Ident); ok && c.pass.TypesInfo.ObjectOf(lid) == obj {
			if call, ok := ast.Unparen(as.Rhs[0]).(*ast.CallExpr); ok {
				m, found = c.builtMethod(body, p, call)
			}
		}
		return !found
	})
	return m, found
}

// requestBuilders finds the package's functions that return a request
// they build, and exports their facts.
func (c *checker) requestBuilders(decls []*ast.FuncDecl) {
	c.untilFixed(decls, func(fn *types.Func) bool { return c.pass.ImportObjectFact(fn, new(requestFact)) },
		func(fd *ast.FuncDecl, fn *types.Func) bool {
			sig := fn.Type().(*types.Signature)
			if sig.Results().Len() == 0 || !isNamed(sig.Results().At(0).Type(), "net/http", "Request") {
				return false
			}
			p := c.paramsOf(fd)
			var f *requestFact
			ast.Inspect(fd.Body, func(n ast.Node) bool {
				if _, ok := n.(*ast.FuncLit); ok || f != nil {
					return false
				}
				ret, ok := n.(*ast.ReturnStmt)
				if !ok || len(ret.Results) == 0 {
					return true
				}
				var m methodFrom
				found := false
				switch r := ast.Unparen(ret.Results[0]).(type) {
				case *ast.CallExpr:
					m, found = c.builtMethod(fd.Body, p, r)
				case *ast.Ident:
					m, found = c.requestMethodIn(fd.Body, p, r)
				}
				if found {
					f = &requestFact{Method: m.method, Param: m.param}
				}
				return f == nil
			})
			if f != nil {
				c.pass.ExportObjectFact(fn, f)
			}
			return f != nil
		})
}

// unsafeSenders finds the package's functions that send a POST or PATCH,
// or a request of their parameter's method, with no key, and exports
// their facts. A package that names a key header anywhere may key its
// requests where it builds them, and exports none.
func (c *checker) unsafeSenders(decls []*ast.FuncDecl) {
	if c.keyNamedInPackage {
		return
	}
	c.untilFixed(decls, func(fn *types.Func) bool { return c.pass.ImportObjectFact(fn, new(sendsFact)) },
		func(fd *ast.FuncDecl, fn *types.Func) bool {
			if c.setsKey(fd.Body) {
				return false
			}
			p := c.paramsOf(fd)
			var f *sendsFact
			add := func(m methodFrom, via string) {
				switch {
				case f != nil:
				case m.param >= 0:
					f = &sendsFact{Param: m.param, Via: via}
				case unsafeMethod(m.method):
					f = &sendsFact{Method: m.method, Via: via}
				}
			}
			for _, s := range c.sends(fd.Body) {
				if m, ok := c.sentMethod(fd.Body, s); ok {
					add(methodFrom{method: m, param: -1}, fn.Name())
				} else if i := requestArg(c.pass.TypesInfo, s); i >= 0 {
					if m, ok := c.requestMethodIn(fd.Body, p, s.Args[i]); ok {
						add(m, fn.Name())
					}
				}
			}
			for _, s := range c.sendCalls(fd.Body) {
				if s.fact.Method != "" {
					add(methodFrom{method: s.fact.Method, param: -1}, s.fact.Via)
				} else if len(s.call.Args) > s.fact.Param {
					if m, ok := c.methodIn(fd.Body, p, s.call.Args[s.fact.Param]); ok {
						add(m, s.fact.Via)
					}
				}
			}
			if f != nil {
				c.pass.ExportObjectFact(fn, f)
			}
			return f != nil
		})
}

// sendCall is a call of a function with sendsFact, and the method it
// sends ("" when not known here).
type sendCall struct {
	call   *ast.CallExpr
	fact   sendsFact
	method string
}

// sendCalls returns the calls in body, not counting function literals'
// nor the checked recursion's own, of functions with sendsFact.
func (c *checker) sendCalls(body *ast.BlockStmt) []sendCall {
	var calls []sendCall
	eachCall(body, func(call *ast.CallExpr) {
		fn := c.callee(call)
		var f sendsFact
		if fn == nil || fn == c.self || !c.pass.ImportObjectFact(fn, &f) {
			return
		}
		s := sendCall{call: call, fact: f, method: f.Method}
		if f.Method == "" && len(call.Args) > f.Param {
			if v, ok := c.constValue(body, call.Args[f.Param]); ok && v.Kind() == constant.String {
				s.method = strings.ToUpper(constant.StringVal(v))
			}
		}
		calls = append(calls, s)
	})
	return calls
}

// unsafeSendCalls returns the calls of sendCalls that send a POST or
// PATCH.
func (c *checker) unsafeSendCalls(body *ast.BlockStmt) []sendCall {
	var unsafe []sendCall
	for _, s := range c.sendCalls(body) {
		if unsafeMethod(s.method) {
			unsafe = append(unsafe, s)
		}
	}
	return unsafe
}

package retryvet

import (
	"fmt"
	"go/ast"
	"go/types"

	"golang.org/x/tools/go/ast/inspector"
)

// retriesFunc is the fact of a function that calls its function parameter
// Param again and again: a retry helper written in the code under
// analysis, such as
//
//	func withRetry(ctx context.Context, n int, op func() error) error
//
// whose loop calls op and waits between the calls, or that hands op to
// another retry helper. A function literal passed to it as Param that
// sends a POST or PATCH without an Idempotency-Key is reported.
type retriesFunc struct {
	Param int // the index of the function parameter it retries
}

// AFact marks retriesFunc as an analysis fact.
func (*retriesFunc) AFact() {}

func (f *retriesFunc) String() string { return fmt.Sprintf("retries its parameter %d", f.Param) }

// retryLibraries are the retry libraries' helpers, each with the index of
// the operation it calls until it succeeds or gives up.
var retryLibraries = []struct {
	path  string
	names []string
	param int
}{
	{"github.com/cenkalti/backoff/v3", []string{"Retry", "RetryNotify", "RetryNotifyWithTimer"}, 0},
	{"github.com/cenkalti/backoff/v4", []string{"Retry", "RetryNotify", "RetryNotifyWithTimer", "RetryWithData", "RetryNotifyWithData", "RetryNotifyWithTimerAndData"}, 0},
	{"github.com/cenkalti/backoff/v5", []string{"Retry"}, 1},
	{"github.com/avast/retry-go/v4", []string{"Do", "DoWithData"}, 0},
	{"github.com/sethvargo/go-retry", []string{"Do", "DoValue"}, 2},
}

// retriedParam returns the index of the argument fn calls again and
// again: a retry library's operation, or a retriesFunc fact's parameter.
func (c *checker) retriedParam(fn *types.Func) (int, bool) {
	if isMethod(fn) {
		return 0, false
	}
	for _, l := range retryLibraries {
		if pkgPath(fn) != l.path {
			continue
		}
		for _, name := range l.names {
			if fn.Name() == name {
				return l.param, true
			}
		}
		return 0, false
	}
	var f retriesFunc
	if c.pass.ImportObjectFact(fn, &f) {
		return f.Param, true
	}
	return 0, false
}

// retryHelpers finds the package's functions that call a function
// parameter in a loop that waits, or pass it on to a retry helper, and
// exports their facts.
func (c *checker) retryHelpers(decls []*ast.FuncDecl) {
	c.untilFixed(decls, func(fn *types.Func) bool { return c.pass.ImportObjectFact(fn, new(retriesFunc)) },
		func(fd *ast.FuncDecl, fn *types.Func) bool {
			i, ok := c.retriedFuncParam(fd)
			if ok {
				c.pass.ExportObjectFact(fn, &retriesFunc{Param: i})
			}
			return ok
		})
}

// retriedFuncParam returns the index of fd's function parameter that fd
// retries: calls in a loop that waits, or hands to a retry helper, as it
// is or called from a closure it hands on.
func (c *checker) retriedFuncParam(fd *ast.FuncDecl) (int, bool) {
	params := c.paramsOf(fd)
	index, found := 0, false
	param := func(e ast.Expr) { // a parameter of function type
		if _, isFunc := types.Unalias(c.pass.TypesInfo.TypeOf(e)).Underlying().(*types.Signature); isFunc {
			index, found = params.of(e)
		}
	}
	ast.Inspect(fd.Body, func(n ast.Node) bool {
		if found {
			return false
		}
		switch n := n.(type) {
		case *ast.ForStmt, *ast.RangeStmt:
			body := loopBody(n)
			if _, waits := c.sendsAndWaits(body); !waits {
				return true
			}
			ast.Inspect(body, func(n ast.Node) bool {
				if call, ok := n.(*ast.CallExpr); ok && !found {
					param(call.Fun)
				}
				return !found
			})
		case *ast.CallExpr:
			if fn := c.callee(n); fn != nil {
				if i, ok := c.retriedParam(fn); ok && len(n.Args) > i {
					if lit, ok := ast.Unparen(n.Args[i]).(*ast.FuncLit); ok {
						// Wrapped in a closure of its own: func() error { return op(ctx) }.
						ast.Inspect(lit.Body, func(n ast.Node) bool {
							if call, ok := n.(*ast.CallExpr); ok && !found {
								param(call.Fun)
							}
							return !found
						})
					} else {
						param(n.Args[i])
					}
				}
			}
		}
		return !found
	})
	return index, found
}

func loopBody(n ast.Node) *ast.BlockStmt {
	if f, ok := n.(*ast.ForStmt); ok {
		return f.Body
	}
	return n.(*ast.RangeStmt).Body
}

// retriedClosure checks a call of a retry helper given a function
// literal, or a function or method of the package by name
// (backoff.Retry(s.charge, b)): each POST or PATCH it sends is repeated on
// every retry, and a key it makes is made anew on every attempt.
func (c *checker) retriedClosure(body *ast.BlockStmt, call *ast.CallExpr, keyed bool) {
	fn := c.callee(call)
	if fn == nil {
		return
	}
	i, ok := c.retriedParam(fn)
	if !ok {
		return
	}
	helper := fn.Name()
	if p := fn.Pkg(); p != nil && p != c.pass.Pkg {
		helper = p.Name() + "." + helper
	}
	c.retriedOperation(body, call, keyed, i, helper)
}

// retryValues finds the variables and fields the package assigns a
// retry helper (s.retry = backoff.Retry, var retry = retrier.Do, a
// struct literal's field), with the index of the operation it retries:
// a call through one retries its operation as a call of the helper does.
func (c *checker) retryValues(ins *inspector.Inspector) {
	c.retryValue = map[types.Object]int{}
	record := func(lhs types.Object, rhs ast.Expr) {
		if fn := c.funcRef(ast.Unparen(rhs)); lhs != nil && fn != nil {
			if i, ok := c.retriedParam(fn); ok {
				c.retryValue[lhs] = i
			}
		}
	}
	ins.Preorder([]ast.Node{(*ast.AssignStmt)(nil), (*ast.ValueSpec)(nil), (*ast.KeyValueExpr)(nil)}, func(n ast.Node) {
		switch n := n.(type) {
		case *ast.AssignStmt:
			if len(n.Lhs) == len(n.Rhs) {
				for i, l := range n.Lhs {
					record(c.objectOf(l), n.Rhs[i])
				}
			}
		case *ast.ValueSpec:
			if len(n.Names) == len(n.Values) {
				for i, id := range n.Names {
					record(c.pass.TypesInfo.ObjectOf(id), n.Values[i])
				}
			}
		case *ast.KeyValueExpr:
			if id, ok := n.Key.(*ast.Ident); ok {
				if f, ok := c.pass.TypesInfo.ObjectOf(id).(*types.Var); ok && f.IsField() {
					record(f, n.Value)
				}
			}
		}
	})
}

// retriedThroughValue checks a call through a variable or field that
// holds a retry helper (see retryValues).
func (c *checker) retriedThroughValue(body *ast.BlockStmt, call *ast.CallExpr, keyed bool) {
	obj := c.objectOf(ast.Unparen(call.Fun))
	if obj == nil {
		return
	}
	if i, ok := c.retryValue[obj]; ok {
		c.retriedOperation(body, call, keyed, i, obj.Name())
	}
}

// retriedOperation checks the operation argument i of call, a call of the
// retry helper named helper.
func (c *checker) retriedOperation(body *ast.BlockStmt, call *ast.CallExpr, keyed bool, i int, helper string) {
	if len(call.Args) <= i {
		return
	}
	var opBody *ast.BlockStmt // what is retried: a function literal, or a function of the package passed by name
	switch a := ast.Unparen(call.Args[i]).(type) {
	case *ast.FuncLit:
		opBody = a.Body
	default:
		fd := c.decls[c.funcRef(a)]
		if fd == nil || fd.Body == nil {
			return
		}
		// Its requests are built in its own body, and keyed there or not.
		opBody, body, keyed = fd.Body, fd.Body, c.setsKey(fd.Body)
	}
	for _, s := range c.sends(opBody) {
		if m, ok := c.sentMethod(body, s); ok && unsafeMethod(m) && !keyed {
			c.report(s.Pos(), "%s retried by %s without an Idempotency-Key: a retry after a lost response repeats its effect; "+
				"fix: req.Header.Set(\"Idempotency-Key\", key) with a key made once, before %s", m, helper, helper)
		}
	}
	for _, set := range c.keySets(opBody) {
		if generated(c.pass.TypesInfo, set.Args[1], opBody) {
			c.report(set.Pos(), "the Idempotency-Key is made anew on every attempt %s makes, so each retry is a new operation to the server; "+
				"fix: make the key once, before %s", helper, helper)
		}
	}
}

// funcRef returns the function or method e names (f, pkg.F, s.method),
// or nil.
func (c *checker) funcRef(e ast.Expr) *types.Func {
	f, _ := c.objectOf(e).(*types.Func)
	return f
}

// sends returns the HTTP sends in body, not counting function literals.
func (c *checker) sends(body *ast.BlockStmt) []*ast.CallExpr {
	s, _ := c.sendsAndWaits(body)
	return s
}

package retryvet

import (
	"fmt"
	"go/ast"
	"go/types"
	"slices"

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
//
// With Result, it is the function it returns that retries: a
// constructor of a retry helper, its loop in the closure it returns
// (cfg.RequestFunc(evaluate) returning func(ctx, fn func(context.Context)
// error) error), kept in a variable or a field and called there.
type retriesFunc struct {
	Param  int  // the index of the function parameter it retries
	Result bool // the function returned retries its parameter Param
}

// AFact marks retriesFunc as an analysis fact.
func (*retriesFunc) AFact() {}

func (f *retriesFunc) String() string {
	if f.Result {
		return fmt.Sprintf("returns a function that retries its parameter %d", f.Param)
	}
	return fmt.Sprintf("retries its parameter %d", f.Param)
}

// retryLibraries are the retry libraries' helpers, each with the index of
// the operation it calls until it succeeds or gives up; recv names the
// receiver's type of a method (go-resiliency's Retrier.Run).
var retryLibraries = []struct {
	path  string
	recv  string
	names []string
	param int
}{
	{"github.com/cenkalti/backoff", "", []string{"Retry", "RetryNotify", "RetryNotifyWithTimer"}, 0},
	{"github.com/cenkalti/backoff/v3", "", []string{"Retry", "RetryNotify", "RetryNotifyWithTimer"}, 0},
	{"github.com/cenkalti/backoff/v4", "", []string{"Retry", "RetryNotify", "RetryNotifyWithTimer", "RetryWithData", "RetryNotifyWithData", "RetryNotifyWithTimerAndData"}, 0},
	{"github.com/cenkalti/backoff/v5", "", []string{"Retry"}, 1},
	{"github.com/avast/retry-go", "", []string{"Do"}, 0},
	{"github.com/avast/retry-go/v4", "", []string{"Do", "DoWithData"}, 0},
	{"github.com/sethvargo/go-retry", "", []string{"Do", "DoValue"}, 2},
	{"github.com/Rican7/retry", "", []string{"Retry"}, 0},
	{"github.com/eapache/go-resiliency/retrier", "Retrier", []string{"Run"}, 0},
	{"github.com/eapache/go-resiliency/retrier", "Retrier", []string{"RunCtx", "RunFn"}, 1},
}

// retriedParam returns the index of the argument fn calls again and
// again: a retry library's operation, or a retriesFunc fact's parameter.
func (c *checker) retriedParam(fn *types.Func) (int, bool) {
	recv := ""
	if r := fn.Type().(*types.Signature).Recv(); r != nil {
		if n, ok := deref(r.Type()).(*types.Named); ok {
			recv = n.Obj().Name()
		}
	}
	for _, l := range retryLibraries {
		if pkgPath(fn) == l.path && recv == l.recv && slices.Contains(l.names, fn.Name()) {
			return l.param, true
		}
	}
	if recv != "" {
		return 0, false
	}
	var f retriesFunc
	if c.pass.ImportObjectFact(fn, &f) && !f.Result {
		return f.Param, true
	}
	return 0, false
}

// returnedRetrier returns the index of the argument the function a call
// of fn returns retries (retriesFunc with Result).
func (c *checker) returnedRetrier(fn *types.Func) (int, bool) {
	var f retriesFunc
	if fn != nil && c.pass.ImportObjectFact(fn, &f) && f.Result {
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
			if i, ok := c.retriedFuncParam(fd.Type, fd.Body); ok {
				c.pass.ExportObjectFact(fn, &retriesFunc{Param: i})
				return true
			}
			if i, ok := c.returnsRetrier(fd); ok {
				c.pass.ExportObjectFact(fn, &retriesFunc{Param: i, Result: true})
				return true
			}
			return false
		})
}

// returnsRetrier returns the index of the function parameter that a
// function literal fd returns retries.
func (c *checker) returnsRetrier(fd *ast.FuncDecl) (int, bool) {
	index, found := 0, false
	ast.Inspect(fd.Body, func(n ast.Node) bool {
		if _, ok := n.(*ast.FuncLit); ok || found {
			return false
		}
		if ret, ok := n.(*ast.ReturnStmt); ok {
			for _, r := range ret.Results {
				if lit, ok := ast.Unparen(r).(*ast.FuncLit); ok && !found {
					index, found = c.retriedFuncParam(lit.Type, lit.Body)
				}
			}
		}
		return !found
	})
	return index, found
}

// retriedFuncParam returns the index of the function parameter that a
// function (its type ft, its body) retries: calls in a loop that waits or
// that goes round again when the call fails, or hands to a retry helper,
// as it is or called from a closure it hands on.
func (c *checker) retriedFuncParam(ft *ast.FuncType, fbody *ast.BlockStmt) (int, bool) {
	params := c.paramsOfType(ft)
	index, found := 0, false
	param := func(e ast.Expr) { // a parameter of function type
		if _, isFunc := types.Unalias(c.pass.TypesInfo.TypeOf(e)).Underlying().(*types.Signature); isFunc {
			index, found = params.of(e)
		}
	}
	ast.Inspect(fbody, func(n ast.Node) bool {
		if found {
			return false
		}
		switch n := n.(type) {
		case *ast.ForStmt, *ast.RangeStmt:
			body := loopBody(n)
			var calls []*ast.CallExpr // of a parameter
			ast.Inspect(body, func(n ast.Node) bool {
				if call, ok := n.(*ast.CallExpr); ok {
					if param(call.Fun); found {
						calls = append(calls, call)
						found = false
					}
				}
				return true
			})
			if len(calls) == 0 {
				return true
			}
			if _, waits := c.sendsAndWaits(body); !waits && !c.rangesOverWaits(n) && !c.repeatsOnFailure(n, body, c.resultsOf(body, calls)) {
				return true
			}
			param(calls[0].Fun)
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
		if lhs == nil {
			return
		}
		if fn := c.funcRef(ast.Unparen(rhs)); fn != nil {
			if i, ok := c.retriedParam(fn); ok {
				c.retryValue[lhs] = i
			}
		}
		if made, ok := ast.Unparen(rhs).(*ast.CallExpr); ok { // s.requestFunc = cfg.RequestFunc(evaluate)
			if i, ok := c.returnedRetrier(c.callee(made)); ok {
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
	if made, ok := ast.Unparen(call.Fun).(*ast.CallExpr); ok { // made and called at once: cfg.retrier()(ctx, op)
		if fn := c.callee(made); fn != nil {
			if i, ok := c.returnedRetrier(fn); ok {
				c.retriedOperation(body, call, keyed, i, fn.Name()+"()")
			}
		}
		return
	}
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
	if !keyed {
		for _, s := range c.unsafeSendCalls(opBody) {
			c.report(s.call.Pos(), "%s sent by %s, retried by %s without an Idempotency-Key: a retry after a lost response repeats its effect; "+
				"fix: set an Idempotency-Key made once, before %s, on the request %s sends", s.method, s.fact.Via, helper, helper, s.fact.Via)
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

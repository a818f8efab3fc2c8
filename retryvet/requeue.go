package retryvet

import (
	"go/ast"
	"go/token"
	"go/types"
)

// requeued checks the sends of a function body that, when they fail, put
// what they sent back on a channel for a worker to send again: a retry
// with no loop in sight,
//
//	if err != nil && item.tries < 3 { item.tries++; c.queue <- item }
//
// A POST or PATCH sent again that way without a key is reported.
func (c *checker) requeued(body *ast.BlockStmt, keyed bool) {
	if keyed {
		return
	}
	check := func(call *ast.CallExpr, method string, inputs map[types.Object]bool) {
		if !unsafeMethod(method) || len(inputs) == 0 {
			return
		}
		results := c.resultsOf(body, []*ast.CallExpr{call})
		found := false
		ast.Inspect(body, func(n ast.Node) bool {
			if _, ok := n.(*ast.FuncLit); ok || found {
				return false
			}
			if ifs, ok := n.(*ast.IfStmt); ok && c.outcomeOf(ifs.Cond, results) == failed {
				found = c.sendsOn(ifs.Body, inputs)
			}
			return !found
		})
		if found {
			c.report(call.Pos(), "%s sent again, put back on a channel when it fails, without an Idempotency-Key: a retry after a lost response repeats its effect; "+
				"fix: make an Idempotency-Key once per item, keep it with the item, and set it on the request", method)
		}
	}
	for _, s := range c.sends(body) {
		if m, ok := c.sentMethod(body, s); ok {
			inputs := c.identsIn(s.Args...)
			if i := requestArg(c.pass.TypesInfo, s); i >= 0 {
				if made, _ := c.requestCall(body, s.Args[i]); made != nil {
					for obj := range c.identsIn(made.Args...) {
						inputs[obj] = true
					}
				}
			}
			check(s, m, inputs)
		}
	}
	for _, s := range c.unsafeSendCalls(body) {
		check(s.call, s.method, c.identsIn(s.call.Args...))
	}
}

// identsIn returns the variables es name (not constants, functions or
// packages).
func (c *checker) identsIn(es ...ast.Expr) map[types.Object]bool {
	objs := map[types.Object]bool{}
	for _, e := range es {
		ast.Inspect(e, func(n ast.Node) bool {
			if id, ok := n.(*ast.Ident); ok {
				if v, ok := c.pass.TypesInfo.ObjectOf(id).(*types.Var); ok && !v.IsField() {
					objs[v] = true
				}
			}
			return true
		})
	}
	return objs
}

// sendsOn reports whether n sends one of objs itself (or its address) on
// a channel: an item or a request, not a string made of one (an error
// message) nor a context.
func (c *checker) sendsOn(n ast.Node, objs map[types.Object]bool) bool {
	found := false
	ast.Inspect(n, func(n ast.Node) bool {
		s, ok := n.(*ast.SendStmt)
		if !ok {
			return !found
		}
		v := ast.Unparen(s.Value)
		if u, ok := v.(*ast.UnaryExpr); ok && u.Op == token.AND {
			v = ast.Unparen(u.X)
		}
		id, ok := v.(*ast.Ident)
		if !ok {
			return true
		}
		obj := c.pass.TypesInfo.ObjectOf(id)
		if _, basic := obj.Type().Underlying().(*types.Basic); objs[obj] && !basic && !isNamed(obj.Type(), "context", "Context") {
			found = true
		}
		return !found
	})
	return found
}

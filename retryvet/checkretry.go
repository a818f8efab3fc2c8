package retryvet

import (
	"go/ast"
	"go/constant"
	"go/token"
	"go/types"
	"net/http"
)

// retriesRefusalsAlone reports whether a CheckRetry's body retries, by
// default, only what the server refused (429 Too Many Requests, which it
// did not process): every return that may retry either names 429 in the
// conditions that lead to it, or returns a setting (a bool field, false
// unless the caller turns it on), and every other term of those
// conditions needs such a setting too. go-tfe's retryHTTPCheck is one:
//
//	if err != nil {
//		return c.retryServerErrors, err
//	}
//	if resp.StatusCode == 429 || (c.retryServerErrors && resp.StatusCode >= 500) {
//		return true, nil
//	}
//
// Its POSTs are retried after a lost response only when the caller asks.
func retriesRefusalsAlone(info *types.Info, body *ast.BlockStmt) bool {
	ok, retries := true, 0
	var conds []ast.Expr // the conditions of the if statements around the node
	var visit func(n ast.Node) bool
	visit = func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.FuncLit:
			return false
		case *ast.IfStmt:
			if n.Init != nil {
				ast.Inspect(n.Init, visit)
			}
			conds = append(conds, n.Cond)
			ast.Inspect(n.Body, visit)
			conds = conds[:len(conds)-1]
			if n.Else != nil {
				ast.Inspect(n.Else, visit) // an else is not under the condition
			}
			return false
		case *ast.ReturnStmt:
			if len(n.Results) == 0 {
				ok = false
				return false
			}
			r := ast.Unparen(n.Results[0])
			tv := info.Types[r]
			switch {
			case tv.Value != nil && tv.Value.Kind() == constant.Bool && !constant.BoolVal(tv.Value):
			case setting(info, r):
				retries++
			case tv.Value != nil && tv.Value.Kind() == constant.Bool && len(conds) > 0 && refusalOnly(info, conds[len(conds)-1]):
				retries++
			default:
				ok = false
			}
		}
		return ok
	}
	ast.Inspect(body, visit)
	return ok && retries > 0
}

// refusalOnly reports whether each term of an || condition is a test for
// 429, or needs a setting (setting && ...).
func refusalOnly(info *types.Info, cond ast.Expr) bool {
	cond = ast.Unparen(cond)
	if b, ok := cond.(*ast.BinaryExpr); ok {
		switch b.Op {
		case token.LOR:
			return refusalOnly(info, b.X) && refusalOnly(info, b.Y)
		case token.LAND:
			return setting(info, b.X) || setting(info, b.Y) || refusalOnly(info, b.X) || refusalOnly(info, b.Y)
		case token.EQL:
			for _, e := range []ast.Expr{b.X, b.Y} {
				if v, ok := constInt(info, e); ok && v == http.StatusTooManyRequests {
					return true
				}
			}
		}
	}
	return false
}

// setting reports whether e is a bool field: an option the caller sets.
func setting(info *types.Info, e ast.Expr) bool {
	sel, ok := ast.Unparen(e).(*ast.SelectorExpr)
	if !ok {
		return false
	}
	v, ok := info.ObjectOf(sel.Sel).(*types.Var)
	if !ok || !v.IsField() {
		return false
	}
	b, ok := v.Type().Underlying().(*types.Basic)
	return ok && b.Kind() == types.Bool
}

// Package retryvet is an analyzer that finds unsafe retries: requests with
// side effects sent again without an idempotency key, keys made anew on
// every attempt, SDK retries stacked on a retrying Transport, and retry
// loops without a bound.
//
// It reports, each with a one-line fix:
//
//   - a POST or PATCH retried without an Idempotency-Key: by
//     go-retryablehttp (a request made with retryablehttp.NewRequest or
//     wrapped by FromRequest, or an http.NewRequest sent through a
//     StandardClient() kept in a variable or field, with no key header, in
//     a package that sets no CheckRetry and no RetryMax but 0), by resty v2
//     (SetRetryCount above 0 retries every method after a transport
//     error: reported where the package also sends a POST or PATCH with
//     resty, names no key header, and adds no retry condition that could
//     refuse them), by resty v3 (SetRetryAllowNonIdempotent(true) with
//     SetRetryCount), by failsafehttp (failsafehttp.NewRequest of such
//     a request), by a hand-written loop that sends it and waits (its
//     send a client's Post, resty's Post, Patch or Execute, or any call
//     that takes an *http.Request and returns an *http.Response and an
//     error: a client's Do, a RoundTripper's RoundTrip, a function value,
//     an SDK's own doRequest; its wait time.Sleep, time.After, a Timer, or
//     a function of the package that waits), or by a retry helper given a
//     function literal that sends it (cenkalti/backoff v2 to v5,
//     avast/retry-go v3 and v4, sethvargo/go-retry, Rican7/retry,
//     eapache/go-resiliency's Retrier, or a function of the code's own
//     whose loop calls its function parameter and waits), or by a heimdall
//     httpclient given a retry count;
//   - a request of whatever method it is given resent without an
//     Idempotency-Key: a retry loop that sends a request whose method it
//     does not know (a parameter, a field), or go-retryablehttp's
//     FromRequest of such a request, its NewRequest of a method known at
//     run time (not a parameter: that is followed to the callers), or a
//     StandardClient's Do of such a request, in a package that never
//     names the key header and where neither the function nor the
//     functions of the package it calls read the request's Method (an
//     SDK's transport, which retries its POSTs as its GETs);
//   - an Idempotency-Key generated inside the loop or the retried
//     function literal that sends it, so that every attempt is a new
//     operation;
//   - SDK retries left on over a retryhttp.Transport: stripe-go without
//     MaxNetworkRetries 0, aws-sdk-go-v2 without aws.NopRetryer, openai-go
//     and anthropic-sdk-go without option.WithMaxRetries(0), looking at
//     the client handed to the SDK (an http.Client literal, or a variable
//     or field assigned one); a client it cannot trace counts as retrying
//     when the package builds a retryhttp.Transport;
//   - a retry loop (a for without a condition that sends and sleeps) with no
//     attempt bound and no context.
//
// A request builder that forwards its method parameter into a request
// go-retryablehttp retries (an SDK's NewRequest(method, path, ...)) is
// remembered as an analysis fact, across functions and packages, and the
// calls that pass it POST or PATCH are reported where the constant is. So
// is a retry helper (a function that calls its function parameter in a
// loop that waits, or hands it to another helper), and the function
// literals given to it are checked as the loop's body would be.
//
// A key is any header of -key-headers (DefaultKeyHeaders: the IETF
// draft's and vendors' own) or, in a JSON request body, any field of
// -key-fields (DefaultKeyFields). A retry written as a recursion is
// checked as a loop is; a loop that sends another request on each pass
// (made from the item it goes through) is not a retry.
//
// golangci-lint runs it as a module plugin: see package
// [github.com/retryhttp/retryhttp/retryvet/golangci].
//
// A function that sends a request parameter through an *http.Client
// parameter (an SDK's DoRequestWithClient(ctx, client, req)) is remembered
// too, and a go-retryablehttp StandardClient() handed to it is checked as
// its own Do would be.
//
// A loop that does not wait is a retry when it leaves after a send
// succeeds or goes round again after one fails (err == nil, a 2xx,
// shouldRetry(resp, err)); so is a recursion that calls itself with the
// same request where a send failed, a range over an iterator that waits,
// and a send that puts what it sent back on a channel when it fails. A
// function that sends a POST or PATCH (or builds a request of its
// parameter's method) is remembered as an analysis fact, so a retry
// around a call of an SDK's method is judged by what the method sends.
//
// What it cannot see it does not report: a key set in another function,
// a Transport built in another package, a retry queue gated by time
// checks. A method chosen at run time is reported only as a request of
// any method, as above.
//
// A call that the protocol makes safe to repeat, which no rule can know (a
// POST that writes at an offset, say), is marked with a directive on its
// line or the line before, with the reason:
//
//	//retryvet:ignore the upload API writes by offset: a repeated chunk is a no-op
//
// A directive without a reason is reported itself. With -show-ignored the
// ignored findings are reported too, with their reasons.
package retryvet

import (
	"go/ast"
	"go/constant"
	"go/token"
	"go/types"
	"maps"
	"reflect"
	"slices"
	"strings"

	"golang.org/x/tools/go/analysis"
	"golang.org/x/tools/go/analysis/passes/inspect"
	"golang.org/x/tools/go/ast/inspector"
	"golang.org/x/tools/go/types/typeutil"
)

// Analyzer is retryvet.
var Analyzer = newAnalyzer()

// showIgnored is the -show-ignored flag.
var showIgnored bool

// DefaultKeyHeaders are the headers a server dedupes on that -key-headers
// names by default: the IETF draft's Idempotency-Key, its X- form, and
// vendors' own (PayPal's PayPal-Request-Id, Checkout.com's
// Cko-Idempotency-Key, Razorpay's X-Payout-Idempotency).
const DefaultKeyHeaders = "Idempotency-Key,X-Idempotency-Key,PayPal-Request-Id,Cko-Idempotency-Key,X-Payout-Idempotency"

// DefaultKeyFields are the fields of a JSON request body a server dedupes
// on that -key-fields names by default: idempotency_key (Square's, and
// others'), idempotencyKey, AWS's ClientToken, Segment's messageId.
const DefaultKeyFields = "idempotency_key,idempotencyKey,ClientToken,clientToken,messageId"

// keyHeaders and keyFields are the -key-headers and -key-fields flags.
var (
	keyHeaders = nameList{list: strings.Split(DefaultKeyHeaders, ",")}
	keyFields  = nameList{list: strings.Split(DefaultKeyFields, ",")}
)

// nameList is a flag of comma-separated names.
type nameList struct{ list []string }

func (l *nameList) String() string { return strings.Join(l.list, ",") }

// has reports whether l names s, in any case: header names are
// case-insensitive, and so are the JSON field names encoding/json matches.
func (l *nameList) has(s string) bool {
	return slices.ContainsFunc(l.list, func(k string) bool { return strings.EqualFold(k, s) })
}

func (l *nameList) Set(v string) error {
	l.list = nil
	for n := range strings.SplitSeq(v, ",") {
		if n = strings.TrimSpace(n); n != "" {
			l.list = append(l.list, n)
		}
	}
	return nil
}

func newAnalyzer() *analysis.Analyzer {
	a := &analysis.Analyzer{
		Name:      "retryvet",
		Doc:       "report retries that can repeat a side effect: POST/PATCH retried without an Idempotency-Key, keys made per attempt, SDK retries over a retrying Transport, unbounded retry loops",
		URL:       "https://pkg.go.dev/github.com/retryhttp/retryhttp/retryvet",
		Requires:  []*analysis.Analyzer{inspect.Analyzer},
		Run:       run,
		FactTypes: []analysis.Fact{new(retriedMethod), new(retriesFunc), new(sendsThrough), new(waitsFact), new(requestFact), new(sendsFact), new(iterWaitsFact)},
	}
	a.Flags.BoolVar(&showIgnored, "show-ignored", false, "also report the findings a //retryvet:ignore directive silences, with its reason")
	a.Flags.Var(&keyHeaders, "key-headers", "comma-separated headers a server dedupes on: a request that sets one is keyed")
	a.Flags.Var(&keyFields, "key-fields", "comma-separated JSON body fields a server dedupes on: a request whose body sets one is keyed")
	return a
}

// Import paths of the libraries it knows.
const (
	pathRetryablehttp = "github.com/hashicorp/go-retryablehttp"
	pathFailsafehttp  = "github.com/failsafe-go/failsafe-go/failsafehttp"
	pathRetryhttp     = "github.com/retryhttp/retryhttp"
	pathStripe        = "github.com/stripe/stripe-go"
	pathAWSConfig     = "github.com/aws/aws-sdk-go-v2/config"
	pathOpenAIOption  = "github.com/openai/openai-go"
	pathAnthropic     = "github.com/anthropics/anthropic-sdk-go"
	pathRestyV1       = "gopkg.in/resty.v1"
	pathRestyV2       = "github.com/go-resty/resty/v2"
	pathRestyV3       = "resty.dev/v3"
	pathRehttp        = "github.com/PuerkitoBio/rehttp"
	pathHeimdall      = "github.com/gojek/heimdall/v7/httpclient"
)

func run(pass *analysis.Pass) (any, error) {
	ins := pass.ResultOf[inspect.Analyzer].(*inspector.Inspector)
	c := &checker{pass: pass, ignored: ignoreDirectives(pass), decls: map[*types.Func]*ast.FuncDecl{}}
	var decls []*ast.FuncDecl
	ins.Preorder([]ast.Node{(*ast.FuncDecl)(nil)}, func(n ast.Node) {
		fd := n.(*ast.FuncDecl)
		decls = append(decls, fd)
		if fn, ok := pass.TypesInfo.Defs[fd.Name].(*types.Func); ok {
			c.decls[fn] = fd
		}
	})
	c.scanPackage(ins)
	c.waiters(decls)
	c.forwarders(decls)
	c.retryHelpers(decls)
	c.retryValues(ins)
	c.senders(decls)
	c.requestBuilders(decls)
	c.unsafeSenders(decls)
	ins.Preorder([]ast.Node{(*ast.CompositeLit)(nil)}, func(n ast.Node) { c.stripeConfig(n.(*ast.CompositeLit)) })
	ins.Preorder([]ast.Node{(*ast.FuncDecl)(nil), (*ast.FuncLit)(nil)}, func(n ast.Node) {
		var body *ast.BlockStmt
		switch f := n.(type) {
		case *ast.FuncDecl:
			body = f.Body
		case *ast.FuncLit:
			body = f.Body
		}
		if body != nil {
			c.function(body)
		}
		if fd, ok := n.(*ast.FuncDecl); ok && body != nil && c.recurses(fd) {
			// Its call of itself repeats it; it is no wait, though it may
			// reach one (a redirect followed by recursion is no retry).
			c.self = pass.TypesInfo.Defs[fd.Name].(*types.Func)
			c.loop(body, fd, body, false, c.setsKey(body), "recursion")
			c.self = nil
		}
	})
	return nil, nil
}

type checker struct {
	pass          *analysis.Pass
	checkRetrySet bool // the package assigns a CheckRetry: it may exclude POSTs
	retryCountSet bool // the package calls resty v3's SetRetryCount
	retryhttpUsed bool // the package builds a retryhttp.Transport

	ignored         map[ignoreAt]string   // the //retryvet:ignore directives, by file and line, with their reasons
	retryMaxZero    bool                  // every RetryMax the package sets is 0: its go-retryablehttp clients do not retry
	standardClients map[types.Object]bool // variables and fields holding a go-retryablehttp StandardClient(): retrying *http.Clients
	httpClients     map[types.Object]bool // variables and fields assigned an http.Client literal: true when its Transport is a retryhttp.Transport

	restyUnsafeSend   bool // the package sends a POST or PATCH with resty v2
	unsafeRequest     bool // the package makes or sends a POST or PATCH with net/http
	restyCondition    bool // the package adds a resty v2 retry condition that may read the method
	heimdallRetries   bool // the package gives a heimdall httpclient a retry count that may be above 0
	keyNamedInPackage bool // the package names the Idempotency-Key header somewhere

	reported map[token.Pos]bool // where a finding was reported
	self     *types.Func        // the function whose recursion is being checked

	retryValue map[types.Object]int // variables and fields holding a retry helper: the index of its operation

	waiting     map[*types.Func]bool          // the package's functions that wait (see waits)
	iterWaiting map[*types.Func]bool          // the package's functions that return an iterator that waits (see rangesOverWaits)
	decls       map[*types.Func]*ast.FuncDecl // the package's functions, by object
}

// scanPackage records the package-wide facts the checks depend on.
func (c *checker) scanPackage(ins *inspector.Inspector) {
	retryMaxes, zeroes := 0, 0 // RetryMax assignments, and those of 0
	ins.Preorder([]ast.Node{(*ast.AssignStmt)(nil), (*ast.KeyValueExpr)(nil), (*ast.CallExpr)(nil), (*ast.CompositeLit)(nil), (*ast.IndexExpr)(nil), (*ast.ValueSpec)(nil)}, func(n ast.Node) {
		switch n := n.(type) {
		case *ast.ValueSpec:
			lhs := make([]ast.Expr, len(n.Names))
			for i, id := range n.Names {
				lhs[i] = id
			}
			c.scanStandardClients(lhs, n.Values)
			c.scanHTTPClients(lhs, n.Values)
		case *ast.AssignStmt:
			c.scanStandardClients(n.Lhs, n.Rhs)
			c.scanHTTPClients(n.Lhs, n.Rhs)
			for i, l := range n.Lhs {
				sel, ok := l.(*ast.SelectorExpr)
				switch {
				case !ok:
				case sel.Sel.Name == "CheckRetry" && len(n.Rhs) == len(n.Lhs):
					c.checkRetrySet = c.checkRetrySet || c.refusesUnsafe(n.Rhs[i])
				case sel.Sel.Name == "RetryMax" && len(n.Rhs) == len(n.Lhs):
					retryMaxes++
					if isZero(c.pass.TypesInfo, n.Rhs[i]) {
						zeroes++
					}
				}
			}
		case *ast.KeyValueExpr:
			if id, ok := n.Key.(*ast.Ident); ok {
				c.scanStandardClients([]ast.Expr{id}, []ast.Expr{n.Value})
				c.scanHTTPClients([]ast.Expr{id}, []ast.Expr{n.Value})
			}
			switch id, _ := n.Key.(*ast.Ident); {
			case id == nil:
			case id.Name == "CheckRetry":
				c.checkRetrySet = c.checkRetrySet || c.refusesUnsafe(n.Value)
			case id.Name == "RetryMax":
				retryMaxes++
				if isZero(c.pass.TypesInfo, n.Value) {
					zeroes++
				}
			}
		case *ast.CallExpr:
			c.scanRestyCall(n)
			for _, a := range n.Args {
				if s, ok := constString(c.pass.TypesInfo, a); ok && keyHeaders.has(s) {
					c.keyNamedInPackage = true
				}
			}
		case *ast.IndexExpr:
			if s, ok := constString(c.pass.TypesInfo, n.Index); ok && keyHeaders.has(s) {
				c.keyNamedInPackage = true
			}
		case *ast.CompositeLit:
			if isNamed(c.pass.TypesInfo.TypeOf(n), pathRetryhttp, "Transport") {
				c.retryhttpUsed = true
			}
		}
	})
	c.retryMaxZero = retryMaxes > 0 && zeroes == retryMaxes
}

// scanStandardClients records the variables and fields assigned a
// go-retryablehttp Client's StandardClient(): a plain *http.Client whose
// Do retries.
func (c *checker) scanStandardClients(lhs, rhs []ast.Expr) {
	if len(lhs) != len(rhs) {
		return
	}
	for i, r := range rhs {
		call, ok := ast.Unparen(r).(*ast.CallExpr)
		if !ok {
			continue
		}
		if fn := c.callee(call); fn == nil || pkgPath(fn) != pathRetryablehttp || fn.Name() != "StandardClient" {
			continue
		}
		if obj := c.objectOf(lhs[i]); obj != nil {
			if c.standardClients == nil {
				c.standardClients = map[types.Object]bool{}
			}
			c.standardClients[obj] = true
		}
	}
}

// scanHTTPClients records the variables and fields assigned an
// http.Client literal, and whether it sends through a retryhttp.Transport.
func (c *checker) scanHTTPClients(lhs, rhs []ast.Expr) {
	if len(lhs) != len(rhs) {
		return
	}
	for i, r := range rhs {
		retrying, ok := c.clientLiteral(r)
		if !ok {
			continue
		}
		if obj := c.objectOf(lhs[i]); obj != nil {
			if c.httpClients == nil {
				c.httpClients = map[types.Object]bool{}
			}
			c.httpClients[obj] = c.httpClients[obj] || retrying
		}
	}
}

// clientLiteral reports whether e is an http.Client literal (or its
// address), and whether its Transport is a retryhttp.Transport.
func (c *checker) clientLiteral(e ast.Expr) (retrying, ok bool) {
	e = ast.Unparen(e)
	if u, isAddr := e.(*ast.UnaryExpr); isAddr && u.Op == token.AND {
		e = u.X
	}
	lit, isLit := e.(*ast.CompositeLit)
	if !isLit || !isNamed(c.pass.TypesInfo.TypeOf(lit), "net/http", "Client") {
		return false, false
	}
	for _, el := range lit.Elts {
		if kv, isKV := el.(*ast.KeyValueExpr); isKV {
			if id, _ := kv.Key.(*ast.Ident); id != nil && id.Name == "Transport" && isNamed(c.pass.TypesInfo.TypeOf(kv.Value), pathRetryhttp, "Transport") {
				return true, true
			}
		}
	}
	return false, true
}

// retryingClient reports whether e, the HTTP client given to an SDK,
// sends through a retryhttp.Transport: an http.Client literal, or a
// variable or field assigned one in the package. A client retryvet cannot
// trace (a parameter, a value from another package) counts as retrying
// when the package builds a retryhttp.Transport.
func (c *checker) retryingClient(e ast.Expr) bool {
	if retrying, ok := c.clientLiteral(e); ok {
		return retrying
	}
	if retrying, ok := c.httpClients[c.objectOf(e)]; ok {
		return retrying
	}
	return c.retryhttpUsed
}

// optionArg returns the argument of the option call named name (from a
// package under path, if path is set) among call's arguments.
func (c *checker) optionArg(call *ast.CallExpr, path, name string) (ast.Expr, bool) {
	for _, a := range call.Args {
		if ac, ok := ast.Unparen(a).(*ast.CallExpr); ok && len(ac.Args) == 1 {
			if fn := c.callee(ac); fn != nil && fn.Name() == name && (path == "" || strings.HasPrefix(pkgPath(fn), path)) {
				return ac.Args[0], true
			}
		}
	}
	return nil, false
}

// objectOf is the variable or field e names: x, or x.f.
func (c *checker) objectOf(e ast.Expr) types.Object {
	switch e := ast.Unparen(e).(type) {
	case *ast.Ident:
		return c.pass.TypesInfo.ObjectOf(e)
	case *ast.SelectorExpr:
		return c.pass.TypesInfo.ObjectOf(e.Sel)
	}
	return nil
}

// scanRestyCall records what resty calls the package makes.
func (c *checker) scanRestyCall(call *ast.CallExpr) {
	fn := c.callee(call)
	if fn == nil {
		return
	}
	switch path, name := pkgPath(fn), fn.Name(); {
	case path == pathRestyV3 && name == "SetRetryCount":
		c.retryCountSet = true
	case restyEveryMethod(path) && (name == "Post" || name == "Patch") && isMethod(fn):
		c.restyUnsafeSend = true
	case restyEveryMethod(path) && (name == "Execute" || name == "Send") && isMethod(fn):
		if m, ok := c.method(call, 0); ok && unsafeMethod(m) {
			c.restyUnsafeSend = true
		}
	case path == "net/http" && (name == "NewRequest" || name == "NewRequestWithContext") && !isMethod(fn):
		arg := 0
		if name == "NewRequestWithContext" {
			arg = 1
		}
		if m, ok := c.method(call, arg); ok && unsafeMethod(m) {
			c.unsafeRequest = true
		}
	case path == "net/http" && (name == "Post" || name == "PostForm"):
		c.unsafeRequest = true
	case path == pathHeimdall && name == "WithRetryCount" && len(call.Args) == 1:
		if n, ok := constInt(c.pass.TypesInfo, call.Args[0]); !ok || n > 0 {
			c.heimdallRetries = true
		}
	case restyEveryMethod(path) && (name == "AddRetryCondition" || name == "SetRetryConditions") && len(call.Args) > 0:
		// A condition written here refuses POST and PATCH only if it reads
		// the request's method; one defined elsewhere is given the benefit
		// of the doubt.
		lit, ok := ast.Unparen(call.Args[0]).(*ast.FuncLit)
		if !ok || readsMethod(lit.Body) {
			c.restyCondition = true
		}
	}
}

// refusesUnsafe reports whether a CheckRetry may refuse to retry a POST:
// one that reads the request's method, never retries, or by default
// retries only 429s (see retriesRefusalsAlone). Most retry
// every method (go-retryablehttp's DefaultRetryPolicy and
// ErrorPropagatedRetryPolicy do): those leave a POST as unsafe as before.
// A variable (an option a caller may pass, as an SDK's WithCustomRetry
// takes one) is the caller's choice, not the package's default: it hides
// nothing. Another package's function retryvet cannot read is given the
// benefit of the doubt.
func (c *checker) refusesUnsafe(e ast.Expr) bool {
	switch e := ast.Unparen(e).(type) {
	case *ast.FuncLit:
		return readsMethod(e.Body) || neverRetries(c.pass.TypesInfo, e.Body) || retriesRefusalsAlone(c.pass.TypesInfo, e.Body)
	case *ast.Ident, *ast.SelectorExpr:
		fn, ok := c.objectOf(e).(*types.Func)
		switch {
		case !ok:
			return false
		case pkgPath(fn) == pathRetryablehttp:
			return false
		case fn.Pkg() != c.pass.Pkg:
			return true
		}
		if fd := c.decls[fn]; fd != nil && fd.Body != nil {
			return readsMethod(fd.Body) || neverRetries(c.pass.TypesInfo, fd.Body) || retriesRefusalsAlone(c.pass.TypesInfo, fd.Body)
		}
	}
	return true
}

// neverRetries reports whether every return of body (a CheckRetry's)
// returns false first.
func neverRetries(info *types.Info, body *ast.BlockStmt) bool {
	returns, falses := 0, 0
	ast.Inspect(body, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.FuncLit:
			return false
		case *ast.ReturnStmt:
			returns++
			if len(n.Results) > 0 {
				if tv, ok := info.Types[n.Results[0]]; ok && tv.Value != nil && tv.Value.Kind() == constant.Bool && !constant.BoolVal(tv.Value) {
					falses++
				}
			}
		}
		return true
	})
	return returns > 0 && returns == falses
}

// readsMethod reports whether n reads a field or method named Method.
func readsMethod(n ast.Node) bool {
	found := false
	ast.Inspect(n, func(n ast.Node) bool {
		if sel, ok := n.(*ast.SelectorExpr); ok && sel.Sel.Name == "Method" {
			found = true
		}
		return !found
	})
	return found
}

// function checks one function body.
func (c *checker) function(body *ast.BlockStmt) {
	keyed := c.setsKey(body)
	c.requeued(body, keyed)
	ast.Inspect(body, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.FuncLit:
			return false // checked on its own
		case *ast.CallExpr:
			c.call(body, n, keyed)
		case *ast.ForStmt:
			c.loop(body, n, n.Body, n.Cond == nil, keyed, "loop")
		case *ast.RangeStmt:
			c.loop(body, n, n.Body, false, keyed, "loop")
		}
		return true
	})
}

// call checks the calls that retry on their own.
func (c *checker) call(body *ast.BlockStmt, call *ast.CallExpr, keyed bool) {
	fn := c.callee(call)
	if fn == nil {
		c.retriedThroughValue(body, call, keyed)
		return
	}
	c.forwardedCall(call, keyed)
	c.retriedClosure(body, call, keyed)
	c.sentThroughCall(body, call, keyed)
	path := pkgPath(fn)
	switch {
	case path == pathRetryablehttp && (fn.Name() == "NewRequest" || fn.Name() == "NewRequestWithContext"):
		arg := 0
		if fn.Name() == "NewRequestWithContext" {
			arg = 1
		}
		if keyed || c.checkRetrySet || c.retryMaxZero || len(call.Args) <= arg {
			return
		}
		switch m, ok := c.method(call, arg); {
		case ok && unsafeMethod(m):
			c.report(call.Pos(), "%s retried by go-retryablehttp without an Idempotency-Key: a retry after a lost response repeats its effect; "+
				"fix: req.Header.Set(\"Idempotency-Key\", key) once, before Do, or exclude it in CheckRetry", m)
		case !ok && !c.isParam(body, call.Args[arg]): // a parameter is followed to its callers (forward.go)
			c.anyMethod(body, call.Pos(), "go-retryablehttp retries the request NewRequest makes", retryableRefusal)
		}
	case path == pathRetryablehttp && (fn.Name() == "Post" || fn.Name() == "PostForm") && isMethod(fn):
		if !keyed && !c.checkRetrySet && !c.retryMaxZero {
			c.report(call.Pos(), "POST retried by go-retryablehttp's Client.%s, which cannot carry an Idempotency-Key: a retry after a lost response repeats its effect; "+
				"fix: build the request with retryablehttp.NewRequest, set its Idempotency-Key once, and send it with Do", fn.Name())
		}
	case restyEveryMethod(path) && fn.Name() == "SetRetryCount" && isMethod(fn) && len(call.Args) == 1:
		if n, ok := constInt(c.pass.TypesInfo, call.Args[0]); ok && n <= 0 {
			return // no retries
		}
		if c.restyUnsafeSend && !c.restyCondition && !c.keyNamedInPackage {
			c.report(call.Pos(), "resty %s retries every method after a transport error once SetRetryCount is above 0, "+
				"and this package sends POST or PATCH with resty and no Idempotency-Key: a retry after a lost response repeats its effect; "+
				"fix: set an Idempotency-Key header on each POST and PATCH (one per operation), or AddRetryCondition that refuses them", restyMajor(path))
		}
	case path == pathRestyV3 && fn.Name() == "SetRetryAllowNonIdempotent":
		// A function that sets, reads or checks the key header is taken
		// to send keyed requests only.
		if len(call.Args) == 1 && isTrue(c.pass.TypesInfo, call.Args[0]) && c.retryCountSet && !keyed && !c.mentionsKey(body) {
			c.report(call.Pos(), "resty retries POST and PATCH here, with no Idempotency-Key of its own: a retry after a lost response repeats its effect; "+
				"fix: set an Idempotency-Key header on each such request (one per operation), or drop %s(true)", fn.Name())
		}
	case path == pathRetryablehttp && fn.Name() == "FromRequest" && len(call.Args) == 1:
		if keyed || c.checkRetrySet || c.retryMaxZero {
			return
		}
		switch m, ok := c.requestMethod(body, call.Args[0]); {
		case ok && unsafeMethod(m):
			c.report(call.Pos(), "%s retried by go-retryablehttp (FromRequest) without an Idempotency-Key: a retry after a lost response repeats its effect; "+
				"fix: req.Header.Set(\"Idempotency-Key\", key) once, before FromRequest", m)
		case !ok:
			c.anyMethod(body, call.Pos(), "go-retryablehttp retries the request FromRequest wraps", retryableRefusal)
		}
	case path == "net/http" && fn.Name() == "Do" && isMethod(fn) && len(call.Args) == 1:
		if sel, ok := ast.Unparen(call.Fun).(*ast.SelectorExpr); ok && !keyed {
			c.standardClientSend(body, call.Pos(), sel.X, call.Args[0], "")
		}
	case path == pathHeimdall && isMethod(fn) && (fn.Name() == "Post" || fn.Name() == "Patch" || fn.Name() == "Do"):
		if !c.heimdallRetries || keyed || c.keyNamedInPackage {
			return
		}
		m, ok := strings.ToUpper(fn.Name()), true
		if fn.Name() == "Do" && len(call.Args) == 1 {
			m, ok = c.requestMethod(body, call.Args[0])
		}
		if ok && unsafeMethod(m) {
			c.report(call.Pos(), "%s retried by heimdall's httpclient without an Idempotency-Key: WithRetryCount above 0 sends every method again after an error or a 5xx, "+
				"and a retry after a lost response repeats its effect; fix: pass an Idempotency-Key header (one per operation), or send it with a client without retries", m)
		}
	case path == pathFailsafehttp && fn.Name() == "NewRequest" && len(call.Args) > 0:
		if m, ok := c.requestMethod(body, call.Args[0]); ok && unsafeMethod(m) && !keyed {
			c.report(call.Pos(), "%s retried by failsafehttp without an Idempotency-Key: a retry after a lost response repeats its effect; "+
				"fix: req.Header.Set(\"Idempotency-Key\", key) once, before the request is wrapped", m)
		}
	case path == pathRehttp && fn.Name() == "NewTransport" && len(call.Args) == 3:
		if c.unsafeRequest && !c.keyNamedInPackage && !c.rehttpRefusesUnsafe(call.Args[1]) {
			c.report(call.Pos(), "rehttp retries every method its RetryFn allows, and this package sends POST or PATCH with no Idempotency-Key: "+
				"a retry after a lost response repeats its effect; fix: set an Idempotency-Key header on each POST and PATCH (one per operation), "+
				"or add rehttp.RetryHTTPMethods(\"GET\", \"HEAD\", ...) to the RetryFn with rehttp.RetryAll")
		}
	case path == pathAWSConfig && fn.Name() == "LoadDefaultConfig":
		if hc, ok := c.optionArg(call, pathAWSConfig, "WithHTTPClient"); ok && c.retryingClient(hc) && !c.nopRetryer(call) {
			c.report(call.Pos(), "aws-sdk-go-v2 retries over a retryhttp.Transport: two retry layers multiply attempts; "+
				"fix: config.WithRetryer(func() aws.Retryer { return aws.NopRetryer{} })")
		}
	case (strings.HasPrefix(path, pathOpenAIOption) || strings.HasPrefix(path, pathAnthropic)) && fn.Name() == "NewClient":
		if hc, ok := c.optionArg(call, "", "WithHTTPClient"); ok && c.retryingClient(hc) && !c.maxRetriesZero(call) {
			c.report(call.Pos(), "the SDK retries (2 times by default) over a retryhttp.Transport: two retry layers multiply attempts; "+
				"fix: option.WithMaxRetries(0)")
		}
	}
}

// recurses reports whether fd calls itself: a retry written as a
// recursion repeats its body as a loop does.
func (c *checker) recurses(fd *ast.FuncDecl) bool {
	fn, ok := c.pass.TypesInfo.Defs[fd.Name].(*types.Func)
	if !ok {
		return false
	}
	found := false
	ast.Inspect(fd.Body, func(n ast.Node) bool {
		if call, ok := n.(*ast.CallExpr); ok && c.callee(call) == fn {
			found = true
		}
		return !found
	})
	return found
}

// rehttpRefusesUnsafe reports whether a rehttp RetryFn may refuse to
// retry a POST or PATCH: it restricts the methods (RetryHTTPMethods of
// safe ones, in a RetryAll, or in every branch of a RetryAny), or is a
// function literal that reads the request's method. A RetryFn made
// elsewhere (a variable, another package's function) is given the benefit
// of the doubt; rehttp's other RetryFns retry every method.
func (c *checker) rehttpRefusesUnsafe(e ast.Expr) bool {
	switch e := ast.Unparen(e).(type) {
	case *ast.FuncLit:
		return readsMethod(e.Body)
	case *ast.CallExpr:
		fn := c.callee(e)
		if fn == nil || pkgPath(fn) != pathRehttp {
			return true
		}
		switch fn.Name() {
		case "RetryHTTPMethods":
			for _, a := range e.Args {
				if m, ok := constString(c.pass.TypesInfo, a); ok && unsafeMethod(strings.ToUpper(m)) {
					return false
				}
			}
			return true
		case "RetryAll":
			return slices.ContainsFunc(e.Args, c.rehttpRefusesUnsafe)
		case "RetryAny":
			return len(e.Args) > 0 && !slices.ContainsFunc(e.Args, func(a ast.Expr) bool { return !c.rehttpRefusesUnsafe(a) })
		}
		return false
	}
	return true
}

// stripeConfig checks a stripe.BackendConfig with an HTTPClient.
func (c *checker) stripeConfig(lit *ast.CompositeLit) {
	if !isNamedPrefix(c.pass.TypesInfo.TypeOf(lit), pathStripe, "BackendConfig") {
		return
	}
	var client, zero bool
	for _, e := range lit.Elts {
		kv, ok := e.(*ast.KeyValueExpr)
		if !ok {
			continue
		}
		switch id, _ := kv.Key.(*ast.Ident); {
		case id == nil:
		case id.Name == "HTTPClient":
			client = c.retryingClient(kv.Value)
		case id.Name == "MaxNetworkRetries":
			zero = callOfZero(c.pass.TypesInfo, kv.Value)
		}
	}
	if client && !zero {
		c.report(lit.Pos(), "stripe-go retries over a retryhttp.Transport when MaxNetworkRetries is unset or above 0: two retry layers multiply attempts; "+
			"fix: MaxNetworkRetries: stripe.Int64(0)")
	}
}

// loop checks a region that repeats (what: a "loop", or a "recursion",
// a function that calls itself) and sends requests: one that waits
// between them, or, waiting or not, one that goes round again when a send
// fails and stops when it succeeds (see repeatsOnFailure). A send behind
// a function of the code's own (sendsFact) is a retry in the second kind
// only: a flusher that waits and sends each time counts as no retry.
func (c *checker) loop(body *ast.BlockStmt, loop ast.Node, loopBody *ast.BlockStmt, endless, keyed bool, what string) {
	sends, waits := c.sendsAndWaits(loopBody)
	waits = waits || c.rangesOverWaits(loop)
	behind := c.unsafeSendCalls(loopBody)
	if len(sends) == 0 && len(behind) == 0 {
		return
	}
	calls := slices.Clone(sends)
	for _, s := range behind {
		calls = append(calls, s.call)
	}
	results := c.resultsOf(loopBody, calls)
	var again bool
	if fd, ok := loop.(*ast.FuncDecl); ok {
		again = c.recursesOnFailure(fd, results)
	} else {
		again = c.repeatsOnFailure(loop, loopBody, results)
	}
	if !waits && !again {
		return
	}
	var anyMethod *ast.CallExpr // the first send of a request whose method the loop does not know
	varying := c.loopVaried(loop, loopBody)
	maps.Copy(varying, c.derived(loopBody, results)) // what the last answer said: a cursor, a redirect's Location
	for _, s := range sends {
		if c.sendsVaried(body, s, varying) {
			continue // another request each time (an item of a batch, paced): not a retry
		}
		m, ok := c.sentMethod(body, s)
		switch {
		case ok && unsafeMethod(m) && !keyed:
			c.report(s.Pos(), "%s retried by this %s without an Idempotency-Key: a retry after a lost response repeats its effect; "+
				"fix: req.Header.Set(\"Idempotency-Key\", key) once, before the %s", m, what, what)
		case !ok && anyMethod == nil:
			anyMethod = s
		}
	}
	for _, s := range behind {
		if !again || keyed || slices.ContainsFunc(s.call.Args, func(a ast.Expr) bool { return c.refersTo(a, varying) }) {
			continue
		}
		c.report(s.call.Pos(), "%s sent by %s, retried by this %s without an Idempotency-Key: a retry after a lost response repeats its effect; "+
			"fix: set an Idempotency-Key made once, before the %s, on the request %s sends", s.method, s.fact.Via, what, what, s.fact.Via)
	}
	if anyMethod != nil && !keyed {
		c.anyMethod(body, anyMethod.Pos(), "this "+what+" resends a request", "retry only idempotent methods (check req.Method)")
	}
	for _, set := range c.keySets(loopBody) {
		if generated(c.pass.TypesInfo, set.Args[1], loopBody) {
			c.report(set.Pos(), "the Idempotency-Key is made anew on every attempt, so each retry is a new operation to the server; "+
				"fix: make the key once, before the %s", what)
		}
	}
	if endless && (len(sends) > 0 || again) && !c.usesContext(loopBody) && !c.boundsAttempts(loop, loopBody) {
		c.report(loop.Pos(), "a retry loop with no attempt bound and no context: it retries forever while the dependency is down; "+
			"fix: bound it (for attempt := 1; attempt <= max; attempt++) and stop when ctx is done")
	}
}

// loopVaried returns the variables that take another value on each
// pass of loop: those it declares (a range's key and value, a for's
// init), and those its body assigns from them, however indirectly. A
// recursion has none.
func (c *checker) loopVaried(loop ast.Node, loopBody *ast.BlockStmt) map[types.Object]bool {
	varying := map[types.Object]bool{}
	add := func(e ast.Expr) {
		if id, ok := e.(*ast.Ident); ok {
			if obj := c.pass.TypesInfo.ObjectOf(id); obj != nil {
				varying[obj] = true
			}
		}
	}
	switch l := loop.(type) {
	case *ast.RangeStmt:
		if l.Key != nil {
			add(l.Key)
		}
		if l.Value != nil {
			add(l.Value)
		}
	case *ast.ForStmt:
		if as, ok := l.Init.(*ast.AssignStmt); ok {
			for _, e := range as.Lhs {
				add(e)
			}
		}
	default:
		return varying
	}
	for grew := true; grew; {
		grew = false
		ast.Inspect(loopBody, func(n ast.Node) bool {
			as, ok := n.(*ast.AssignStmt)
			if !ok || !slices.ContainsFunc(as.Rhs, func(e ast.Expr) bool { return c.refersTo(e, varying) }) {
				return true
			}
			for _, e := range as.Lhs {
				if id, ok := e.(*ast.Ident); ok {
					if obj := c.pass.TypesInfo.ObjectOf(id); obj != nil && !varying[obj] {
						varying[obj], grew = true, true
					}
				}
			}
			return true
		})
	}
	return varying
}

// refersTo reports whether e names one of objs.
func (c *checker) refersTo(e ast.Node, objs map[types.Object]bool) bool {
	found := false
	ast.Inspect(e, func(n ast.Node) bool {
		if id, ok := n.(*ast.Ident); ok && objs[c.pass.TypesInfo.ObjectOf(id)] {
			found = true
		}
		return !found
	})
	return found
}

// sendsVaried reports whether send sends a request made from what
// varies from one pass of its loop to the next: its URL or body (or the
// request itself) is an item the loop goes through, so each pass sends
// another request. A retry loop sends the same one again.
func (c *checker) sendsVaried(body *ast.BlockStmt, send *ast.CallExpr, varying map[types.Object]bool) bool {
	if len(varying) == 0 {
		return false
	}
	i := requestArg(c.pass.TypesInfo, send)
	if i < 0 {
		// A client's Post, resty's: the URL and body are its arguments.
		return slices.ContainsFunc(send.Args, func(a ast.Expr) bool { return c.refersTo(a, varying) })
	}
	made, first := c.requestCall(body, send.Args[i])
	if made == nil {
		return c.refersTo(send.Args[i], varying) // the request itself is an item: for _, req := range reqs
	}
	// Its URL and body; not its context or method.
	return slices.ContainsFunc(made.Args[first:], func(a ast.Expr) bool { return c.refersTo(a, varying) })
}

// sendsAndWaits returns the HTTP sends in a loop body, not counting
// function literals, and whether it also waits (time.Sleep, time.After,
// a Timer, or a function that waits). A send is a call of net/http's
// Post, PostForm, Get or Head, of resty's Post, Patch or Execute, or of
// any function, method or function value that takes an *http.Request and
// returns an *http.Response (or a struct that embeds one) and an error,
// as a client's Do and a RoundTripper's RoundTrip do (an SDK's
// doSingleRequest too).
func (c *checker) sendsAndWaits(body *ast.BlockStmt) (sends []*ast.CallExpr, waits bool) {
	eachCall(body, func(call *ast.CallExpr) {
		if c.sendsRequest(call) {
			sends = append(sends, call)
			return
		}
		fn := c.callee(call)
		if fn == nil || fn == c.self {
			return
		}
		switch path, name := pkgPath(fn), fn.Name(); {
		case c.waits(fn):
			waits = true
		case path == "net/http" && (name == "Post" || name == "PostForm" || name == "Get" || name == "Head"):
			sends = append(sends, call)
		case isResty(path) && isMethod(fn) && (name == "Post" || name == "Patch" || name == "Execute"):
			sends = append(sends, call)
		}
	})
	return sends, waits
}

// eachCall calls f for each call in body, not counting those of the
// function literals in it (checked on their own).
func eachCall(body ast.Node, f func(*ast.CallExpr)) {
	ast.Inspect(body, func(n ast.Node) bool {
		if _, ok := n.(*ast.FuncLit); ok {
			return false
		}
		if call, ok := n.(*ast.CallExpr); ok {
			f(call)
		}
		return true
	})
}

// sendsRequest reports whether call takes an *http.Request and returns
// an *http.Response and an error.
func (c *checker) sendsRequest(call *ast.CallExpr) bool {
	t := c.pass.TypesInfo.TypeOf(call.Fun)
	if t == nil || c.pass.TypesInfo.Types[call.Fun].IsType() {
		return false // a conversion
	}
	sig, ok := t.Underlying().(*types.Signature) // a named function type too (type SendFunc func(...))
	if !ok || sig.Results().Len() != 2 || requestArg(c.pass.TypesInfo, call) < 0 {
		return false
	}
	return isResponse(sig.Results().At(0).Type()) &&
		types.Identical(sig.Results().At(1).Type(), types.Universe.Lookup("error").Type())
}

// isResponse reports whether t is an *http.Response, or a pointer to a
// struct that embeds one (an SDK's own Response).
func isResponse(t types.Type) bool {
	if isNamed(t, "net/http", "Response") {
		return true
	}
	p, ok := t.(*types.Pointer)
	if !ok {
		return false
	}
	st, ok := p.Elem().Underlying().(*types.Struct)
	if !ok {
		return false
	}
	for f := range st.Fields() {
		if f.Embedded() && isNamed(f.Type(), "net/http", "Response") {
			return true
		}
	}
	return false
}

// requestArg returns the index of call's *http.Request argument, or -1.
func requestArg(info *types.Info, call *ast.CallExpr) int {
	for i, a := range call.Args {
		if t, ok := info.TypeOf(a).(*types.Pointer); ok && isNamed(t, "net/http", "Request") {
			return i
		}
	}
	return -1
}

func isResty(path string) bool { return restyEveryMethod(path) || path == pathRestyV3 }

// restyEveryMethod reports whether path is a resty (v1 or v2) that
// retries every method after a transport error once SetRetryCount is
// above 0.
func restyEveryMethod(path string) bool { return path == pathRestyV1 || path == pathRestyV2 }

// restyMajor names resty's major version at path, for a report.
func restyMajor(path string) string {
	if path == pathRestyV1 {
		return "v1"
	}
	return "v2"
}

// sentMethod returns the method a send call uses: POST for Post and
// PostForm, PATCH for resty's Patch, GET and HEAD for theirs, the
// constant of resty's Execute, the request's for a call given one.
func (c *checker) sentMethod(body *ast.BlockStmt, call *ast.CallExpr) (string, bool) {
	if fn := c.callee(call); fn != nil && (pkgPath(fn) == "net/http" || isResty(pkgPath(fn))) {
		switch fn.Name() {
		case "Post", "PostForm":
			return "POST", true
		case "Patch":
			return "PATCH", true
		case "Get":
			return "GET", true
		case "Head":
			return "HEAD", true
		case "Execute":
			return c.method(call, 0)
		}
	}
	i := requestArg(c.pass.TypesInfo, call)
	if i < 0 {
		return "", false
	}
	return c.requestMethod(body, call.Args[i])
}

// requestMethod finds the constant method of the request expr names: a
// variable assigned in body from net/http's or go-retryablehttp's
// NewRequest (or NewRequestWithContext), or from a request builder of the
// code's own (requestFact), the method a constant or a local variable
// that holds one.
func (c *checker) requestMethod(body *ast.BlockStmt, expr ast.Expr) (string, bool) {
	m, ok := c.requestMethodIn(body, params{info: c.pass.TypesInfo}, expr)
	return m.method, ok && m.param < 0
}

// requestCall finds the call that made the request expr names: a
// variable assigned from net/http's or go-retryablehttp's NewRequest (or
// NewRequestWithContext) in body, whose URL is its argument first (the
// method the one before).
func (c *checker) requestCall(body *ast.BlockStmt, expr ast.Expr) (made *ast.CallExpr, first int) {
	id, ok := ast.Unparen(expr).(*ast.Ident)
	if !ok {
		return nil, 0
	}
	obj := c.pass.TypesInfo.ObjectOf(id)
	ast.Inspect(body, func(n ast.Node) bool {
		as, ok := n.(*ast.AssignStmt)
		if !ok || made != nil || len(as.Rhs) != 1 || len(as.Lhs) == 0 {
			return made == nil
		}
		lid, ok := as.Lhs[0].(*ast.Ident)
		if !ok || c.pass.TypesInfo.ObjectOf(lid) != obj {
			return true
		}
		call, ok := as.Rhs[0].(*ast.CallExpr)
		if !ok {
			return true
		}
		fn := c.callee(call)
		if fn == nil || pkgPath(fn) != "net/http" && pkgPath(fn) != pathRetryablehttp {
			return true
		}
		switch {
		case fn.Name() == "NewRequest" && len(call.Args) >= 2:
			made, first = call, 1
		case fn.Name() == "NewRequestWithContext" && len(call.Args) >= 3:
			made, first = call, 2
		}
		return made == nil
	})
	return made, first
}

// method returns the constant method argument arg of a call.
func (c *checker) method(call *ast.CallExpr, arg int) (string, bool) {
	if len(call.Args) <= arg {
		return "", false
	}
	s, ok := constString(c.pass.TypesInfo, call.Args[arg])
	return strings.ToUpper(s), ok
}

// setsKey reports whether body sets an Idempotency-Key header anywhere.
func (c *checker) setsKey(body *ast.BlockStmt) bool {
	if len(c.keySets(body)) > 0 {
		return true
	}
	found := false
	ast.Inspect(body, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.IndexExpr:
			if s, ok := constString(c.pass.TypesInfo, n.Index); ok && keyHeaders.has(s) {
				found = true
			}
		case *ast.KeyValueExpr:
			if s, ok := constString(c.pass.TypesInfo, n.Key); ok && (keyHeaders.has(s) || keyFields.has(s)) {
				found = true // a header map's, or a JSON body map's
			}
		case *ast.CompositeLit, *ast.AssignStmt:
			found = found || c.setsKeyField(n)
		}
		return !found
	})
	return found
}

// keySets returns the Header.Set and Header.Add calls of an
// Idempotency-Key in n, and the SetHeader calls of resty.
func (c *checker) keySets(n ast.Node) []*ast.CallExpr {
	var out []*ast.CallExpr
	ast.Inspect(n, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok || len(call.Args) != 2 {
			return true
		}
		sel, ok := call.Fun.(*ast.SelectorExpr)
		if !ok || sel.Sel.Name != "Set" && sel.Sel.Name != "Add" && sel.Sel.Name != "SetHeader" {
			return true
		}
		if s, ok := constString(c.pass.TypesInfo, call.Args[0]); ok && keyHeaders.has(s) {
			out = append(out, call)
		}
		return true
	})
	return out
}

// mentionsKey reports whether body names the Idempotency-Key header in a
// constant anywhere (to set it, read it or check it).
func (c *checker) mentionsKey(body *ast.BlockStmt) bool {
	found := false
	ast.Inspect(body, func(n ast.Node) bool {
		if e, ok := n.(ast.Expr); ok {
			if s, ok := constString(c.pass.TypesInfo, e); ok && keyHeaders.has(s) {
				found = true
			}
		}
		return !found
	})
	return found
}

// usesContext reports whether a loop body refers to a context.Context: a
// variable, or an expression such as req.Context().
func (c *checker) usesContext(body *ast.BlockStmt) bool {
	found := false
	ast.Inspect(body, func(n ast.Node) bool {
		if e, ok := n.(ast.Expr); ok && isNamed(c.pass.TypesInfo.TypeOf(e), "context", "Context") {
			found = true
		}
		return !found
	})
	return found
}

// boundsAttempts reports whether a loop body leaves the loop under a
// comparison of integers (an attempt counter: if n >= max { break }), or
// under a call given a counter the loop counts up (if !shouldRetry(err,
// n) { return }: the bound is the helper's, as in stripe-go).
func (c *checker) boundsAttempts(loop ast.Node, body *ast.BlockStmt) bool {
	found := false
	ast.Inspect(body, func(n ast.Node) bool {
		ifs, ok := n.(*ast.IfStmt)
		if !ok {
			return !found
		}
		be, ok := ifs.Cond.(*ast.BinaryExpr)
		comparison := ok && (be.Op == token.GTR || be.Op == token.GEQ || be.Op == token.LSS || be.Op == token.LEQ || be.Op == token.EQL) && isInteger(c.pass.TypesInfo.TypeOf(be.X))
		if !comparison && !c.gatedByCounter(loop, ifs.Cond) {
			return true
		}
		ast.Inspect(ifs.Body, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.ReturnStmt:
				found = true
			case *ast.BranchStmt:
				if n.Tok == token.BREAK {
					found = true
				}
			}
			return !found
		})
		return !found
	})
	return found
}

// gatedByCounter reports whether cond is a call (or its negation) given
// an integer variable that loop counts up (n++ or n += k).
func (c *checker) gatedByCounter(loop ast.Node, cond ast.Expr) bool {
	if u, ok := ast.Unparen(cond).(*ast.UnaryExpr); ok && u.Op == token.NOT {
		cond = u.X
	}
	call, ok := ast.Unparen(cond).(*ast.CallExpr)
	if !ok {
		return false
	}
	for _, a := range call.Args {
		id, ok := ast.Unparen(a).(*ast.Ident)
		if !ok || !isInteger(c.pass.TypesInfo.TypeOf(id)) {
			continue
		}
		if obj := c.pass.TypesInfo.ObjectOf(id); obj != nil && c.countsUp(loop, obj) {
			return true
		}
	}
	return false
}

// countsUp reports whether n increments obj (obj++, obj += k).
func (c *checker) countsUp(n ast.Node, obj types.Object) bool {
	found := false
	ast.Inspect(n, func(n ast.Node) bool {
		switch s := n.(type) {
		case *ast.IncDecStmt:
			if id, ok := s.X.(*ast.Ident); ok && s.Tok == token.INC && c.pass.TypesInfo.ObjectOf(id) == obj {
				found = true
			}
		case *ast.AssignStmt:
			if id, ok := s.Lhs[0].(*ast.Ident); ok && s.Tok == token.ADD_ASSIGN && c.pass.TypesInfo.ObjectOf(id) == obj {
				found = true
			}
		}
		return !found
	})
	return found
}

// nopRetryer reports whether call passes config.WithRetryer with an
// aws.NopRetryer in it.
func (c *checker) nopRetryer(call *ast.CallExpr) bool {
	found := false
	for _, a := range call.Args {
		ast.Inspect(a, func(n ast.Node) bool {
			if sel, ok := n.(*ast.SelectorExpr); ok && sel.Sel.Name == "NopRetryer" {
				found = true
			}
			return !found
		})
	}
	return found
}

// maxRetriesZero reports whether call passes option.WithMaxRetries(0).
func (c *checker) maxRetriesZero(call *ast.CallExpr) bool {
	for _, a := range call.Args {
		ac, ok := ast.Unparen(a).(*ast.CallExpr)
		if !ok || len(ac.Args) != 1 {
			continue
		}
		if fn := c.callee(ac); fn != nil && fn.Name() == "WithMaxRetries" && isZero(c.pass.TypesInfo, ac.Args[0]) {
			return true
		}
	}
	return false
}

func (c *checker) callee(call *ast.CallExpr) *types.Func {
	fn, _ := typeutil.Callee(c.pass.TypesInfo, call).(*types.Func)
	return fn
}

// generated reports whether v, a key's value, is made inside loop: a call
// (uuid.NewString()), or a variable defined in the loop.
func generated(info *types.Info, v ast.Expr, loop *ast.BlockStmt) bool {
	switch v := ast.Unparen(v).(type) {
	case *ast.CallExpr:
		if info.Types[v.Fun].IsType() && len(v.Args) == 1 {
			return generated(info, v.Args[0], loop) // a conversion (not a call through a named function type)
		}
		return true
	case *ast.Ident:
		obj := info.ObjectOf(v)
		return obj != nil && obj.Pos() >= loop.Pos() && obj.Pos() < loop.End()
	}
	return false
}

func isInteger(t types.Type) bool {
	if t == nil {
		return false
	}
	b, ok := types.Unalias(t).Underlying().(*types.Basic)
	return ok && b.Info()&types.IsInteger != 0
}

func unsafeMethod(m string) bool { return m == "POST" || m == "PATCH" }

// setsKeyField reports whether n sets a struct field whose JSON name is a
// key field: in a composite literal (Params{IdempotencyKey: key}) or by
// assignment (params.IdempotencyKey = key).
func (c *checker) setsKeyField(n ast.Node) bool {
	info := c.pass.TypesInfo
	switch n := n.(type) {
	case *ast.CompositeLit:
		t := info.TypeOf(n)
		if t == nil {
			return false
		}
		st, ok := deref(t).Underlying().(*types.Struct)
		if !ok {
			return false
		}
		for _, e := range n.Elts {
			if kv, ok := e.(*ast.KeyValueExpr); ok {
				if id, ok := kv.Key.(*ast.Ident); ok && keyFieldOf(st, info.ObjectOf(id)) {
					return true
				}
			}
		}
	case *ast.AssignStmt:
		for _, l := range n.Lhs {
			if sel, ok := l.(*ast.SelectorExpr); ok {
				if s, ok := info.Selections[sel]; ok && s.Kind() == types.FieldVal {
					if st, ok := deref(s.Recv()).Underlying().(*types.Struct); ok && keyFieldOf(st, s.Obj()) {
						return true
					}
				}
			}
		}
	}
	return false
}

// keyFieldOf reports whether f is a field of st whose JSON name (its tag's,
// or its own) is a key field.
func keyFieldOf(st *types.Struct, f types.Object) bool {
	for i := range st.NumFields() {
		if st.Field(i) != f {
			continue
		}
		name, _, _ := strings.Cut(reflect.StructTag(st.Tag(i)).Get("json"), ",")
		if name == "" {
			name = f.Name()
		}
		return keyFields.has(name)
	}
	return false
}

func deref(t types.Type) types.Type {
	if p, ok := t.(*types.Pointer); ok {
		return p.Elem()
	}
	return t
}

func isMethod(fn *types.Func) bool { return fn.Type().(*types.Signature).Recv() != nil }

func pkgPath(fn *types.Func) string {
	if fn.Pkg() == nil {
		return ""
	}
	return fn.Pkg().Path()
}

func constString(info *types.Info, e ast.Expr) (string, bool) {
	tv, ok := info.Types[e]
	if !ok || tv.Value == nil || tv.Value.Kind() != constant.String {
		return "", false
	}
	return constant.StringVal(tv.Value), true
}

// constInt returns e's value if it is an integer constant.
func constInt(info *types.Info, e ast.Expr) (int64, bool) {
	tv, ok := info.Types[e]
	if !ok || tv.Value == nil || tv.Value.Kind() != constant.Int {
		return 0, false
	}
	return constant.Int64Val(tv.Value)
}

func isTrue(info *types.Info, e ast.Expr) bool {
	tv, ok := info.Types[e]
	return ok && tv.Value != nil && tv.Value.Kind() == constant.Bool && constant.BoolVal(tv.Value)
}

func isZero(info *types.Info, e ast.Expr) bool {
	tv, ok := info.Types[e]
	return ok && tv.Value != nil && tv.Value.Kind() == constant.Int && constant.Sign(tv.Value) == 0
}

// callOfZero reports whether e is 0 or a call such as stripe.Int64(0).
func callOfZero(info *types.Info, e ast.Expr) bool {
	if isZero(info, e) {
		return true
	}
	call, ok := ast.Unparen(e).(*ast.CallExpr)
	return ok && len(call.Args) == 1 && isZero(info, call.Args[0])
}

// isNamed reports whether t (or what it points to) is the named type
// path.name.
func isNamed(t types.Type, path, name string) bool {
	return namedIs(t, func(p string) bool { return p == path }, name)
}

// isNamedPrefix is isNamed for a package under path (a major version).
func isNamedPrefix(t types.Type, path, name string) bool {
	return namedIs(t, func(p string) bool { return strings.HasPrefix(p, path) }, name)
}

func namedIs(t types.Type, pathOK func(string) bool, name string) bool {
	if t == nil {
		return false
	}
	n, ok := types.Unalias(deref(t)).(*types.Named)
	if !ok || n.Obj().Pkg() == nil {
		return false
	}
	return n.Obj().Name() == name && pathOK(n.Obj().Pkg().Path())
}

// ignoreAt is a line of a file.
type ignoreAt struct {
	file string
	line int
}

const ignoreDirective = "//retryvet:ignore"

// ignoreDirectives reads the package's //retryvet:ignore directives, and
// reports those without a reason.
func ignoreDirectives(pass *analysis.Pass) map[ignoreAt]string {
	out := map[ignoreAt]string{}
	for _, f := range pass.Files {
		for _, g := range f.Comments {
			for _, cm := range g.List {
				rest, ok := strings.CutPrefix(cm.Text, ignoreDirective)
				if !ok || rest != "" && rest[0] != ' ' && rest[0] != '\t' {
					continue
				}
				reason, _, _ := strings.Cut(rest, "//") // a comment after the reason is not the reason
				reason = strings.TrimSpace(reason)
				if reason == "" {
					pass.Reportf(cm.Pos(), "%s needs a reason: say why the call is safe to repeat", ignoreDirective)
					continue
				}
				p := pass.Fset.Position(cm.Pos())
				out[ignoreAt{p.Filename, p.Line}] = reason
			}
		}
	}
	return out
}

// report reports a finding at pos, unless a //retryvet:ignore directive on
// its line or the line before silences it (then only with -show-ignored,
// with the directive's reason).
func (c *checker) report(pos token.Pos, format string, args ...any) {
	if c.reported[pos] {
		return // one finding a place: a loop in a function that recurses is both
	}
	if c.reported == nil {
		c.reported = map[token.Pos]bool{}
	}
	c.reported[pos] = true
	p := c.pass.Fset.Position(pos)
	for _, line := range []int{p.Line, p.Line - 1} {
		if reason, ok := c.ignored[ignoreAt{p.Filename, line}]; ok {
			if showIgnored {
				c.pass.Reportf(pos, "ignored (%s): "+format, append([]any{reason}, args...)...)
			}
			return
		}
	}
	c.pass.Reportf(pos, format, args...)
}

// standardClientSend checks a request req sent through client, at pos:
// directly (client.Do(req)), or by a function of the code's own that sends
// through a client it is given (via names it; see sendsThrough). Only a
// client that is a go-retryablehttp StandardClient() retries.
func (c *checker) standardClientSend(body *ast.BlockStmt, pos token.Pos, client, req ast.Expr, via string) {
	if !c.standardClients[c.objectOf(client)] || c.checkRetrySet || c.retryMaxZero {
		return
	}
	what := "through StandardClient()"
	if via != "" {
		what += " (by " + via + ")"
	}
	switch m, ok := c.requestMethod(body, req); {
	case ok && unsafeMethod(m):
		c.report(pos, "%s retried by go-retryablehttp %s without an Idempotency-Key: a retry after a lost response repeats its effect; "+
			"fix: req.Header.Set(\"Idempotency-Key\", key) once, before Do", m, what)
	case !ok:
		c.anyMethod(body, pos, "go-retryablehttp retries the request sent "+what, retryableRefusal)
	}
}

// sentThroughCall checks a call of a function that sends a request
// through the client it is given (the sendsThrough fact), as the client's
// own Do is checked.
func (c *checker) sentThroughCall(body *ast.BlockStmt, call *ast.CallExpr, keyed bool) {
	fn := c.callee(call)
	if fn == nil || keyed || pkgPath(fn) == "net/http" {
		return
	}
	if client, req, ok := c.sentThrough(call); ok {
		c.standardClientSend(body, call.Pos(), client, req, fn.Name())
	}
}

// retryableRefusal is the other fix of a go-retryablehttp request of any
// method.
const retryableRefusal = "set a CheckRetry that refuses non-idempotent methods (it reads resp.Request.Method)"

// anyMethod reports a request resent whatever its method (what says by
// whom), unless the package names the Idempotency-Key header somewhere
// (it may key the requests where it builds them) or the function checks
// the method.
func (c *checker) anyMethod(body *ast.BlockStmt, pos token.Pos, what, refuse string) {
	if c.keyNamedInPackage || c.checksMethod(body) {
		return
	}
	c.report(pos, "%s whatever its method, POST and PATCH too, without an Idempotency-Key: a retry after a lost response repeats its effect; "+
		"fix: set an Idempotency-Key on requests with side effects (one per operation), or %s", what, refuse)
}

// isParam reports whether e names a parameter of the function whose body
// is body.
func (c *checker) isParam(body *ast.BlockStmt, e ast.Expr) bool {
	id, ok := ast.Unparen(e).(*ast.Ident)
	if !ok {
		return false
	}
	v, ok := c.pass.TypesInfo.ObjectOf(id).(*types.Var)
	return ok && v.Parent() != nil && v.Parent() != c.pass.Pkg.Scope() && v.Pos() < body.Pos()
}

// checksMethod reports whether body, or a function of the package it
// calls, reads a request's Method: a retry that may depend on the method
// is given the benefit of the doubt.
func (c *checker) checksMethod(body *ast.BlockStmt) bool {
	found := false
	ast.Inspect(body, func(n ast.Node) bool {
		if found {
			return false
		}
		switch n := n.(type) {
		case *ast.SelectorExpr:
			found = c.isRequestMethod(n)
		case *ast.CallExpr:
			if fn := c.callee(n); fn != nil && fn.Pkg() == c.pass.Pkg {
				if fd := c.decls[fn]; fd != nil && fd.Body != nil && fd.Body != body {
					found = c.readsRequestMethod(fd.Body)
				}
			}
		}
		return !found
	})
	return found
}

// isRequestMethod reports whether sel is an *http.Request's Method.
func (c *checker) isRequestMethod(sel *ast.SelectorExpr) bool {
	return sel.Sel.Name == "Method" && isNamed(c.pass.TypesInfo.TypeOf(sel.X), "net/http", "Request")
}

// readsRequestMethod reports whether n reads an *http.Request's Method.
func (c *checker) readsRequestMethod(n ast.Node) bool {
	found := false
	ast.Inspect(n, func(n ast.Node) bool {
		if sel, ok := n.(*ast.SelectorExpr); ok && c.isRequestMethod(sel) {
			found = true
		}
		return !found
	})
	return found
}

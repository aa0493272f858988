package config

import (
	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/function"
)

// Guards are calls wf inserts into every parsed expression, so that each
// evaluation pays for what it does out of its budget (limits.go) before
// the expensive part happens. Their names contain a single colon, which no
// function name in a configuration can, so users can neither call nor see
// them.
const (
	// guardIn checks a value about to be walked in full (the arguments of
	// a call, the operands of == and !=, a splat's source): size, depth and
	// numbers, paying for the walk.
	guardIn = "wf:in"
	// guardUnify is guardIn for a conditional's branches, whose types cty
	// unifies in time quadratic in a tuple's length.
	guardUnify = "wf:unify"
	// guardOut checks and pays for a value just produced (a call's
	// result, a for expression's elements, a template's parts).
	guardOut = "wf:out"
	// guardFor is guardIn for a for expression's collection, and pays for
	// its iterations up front.
	guardFor = "wf:for"
)

// literal reports whether e is a literal value or a template of literals
// only ("k%02d").
func literal(e hclsyntax.Expression) bool {
	switch x := e.(type) {
	case *hclsyntax.LiteralValueExpr:
		return true
	case *hclsyntax.TemplateExpr:
		for _, p := range x.Parts {
			if _, ok := p.(*hclsyntax.LiteralValueExpr); !ok {
				return false
			}
		}
		return true
	}
	return false
}

// regroups are the functions whose result holds exactly the values of
// their one argument, in another collection type: never larger than what
// guardIn checked, and paid for by whatever guard encloses them.
var regroups = map[string]bool{"toset": true, "tolist": true}

func isGuard(name string) bool {
	switch name {
	case guardIn, guardUnify, guardOut, guardFor:
		return true
	}
	return false
}

// guardFuncs returns the guard functions of budget b.
func guardFuncs(b *budget) map[string]function.Function { return guardFuncsFor(b, nil) }

// guardFuncsFor returns the guard functions of budget b that calls names
// (calledFunctions), all of them when calls is nil: building the four
// cost a run-time Resolve of a literal URL a third of its time.
func guardFuncsFor(b *budget, calls map[string]bool) map[string]function.Function {
	mk := func(check func(v cty.Value) *limitError) function.Function {
		return function.New(&function.Spec{
			Params: []function.Parameter{{
				Name: "value", Type: cty.DynamicPseudoType,
				AllowNull: true, AllowUnknown: true, AllowDynamicType: true, AllowMarked: true,
			}},
			Type: func(args []cty.Value) (cty.Type, error) { return args[0].Type(), nil },
			Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
				if err := check(args[0]); err != nil {
					return cty.NilVal, err
				}
				return args[0], nil
			},
		})
	}
	var out map[string]function.Function
	for _, name := range [...]string{guardIn, guardUnify, guardOut, guardFor} {
		if calls == nil || calls[name] {
			if out == nil {
				out = make(map[string]function.Function, 4)
			}
			out[name] = mk(guardCheck(b, name))
		}
	}
	if out == nil {
		// budgetFuncs adds to it.
		out = map[string]function.Function{}
	}
	return out
}

// guardCheck is what the guard name checks, spending b.
func guardCheck(b *budget, name string) func(v cty.Value) *limitError {
	switch name {
	case guardUnify:
		return func(v cty.Value) *limitError { return checkValue(b, v, cost{tupleSquare: true}) }
	case guardOut:
		return func(v cty.Value) *limitError { return checkValue(b, v, cost{produced: true}) }
	case guardFor:
		return func(v cty.Value) *limitError {
			if err := checkValue(b, v, plainCost); err != nil {
				return err
			}
			if v.IsKnown() && !v.IsNull() && v.CanIterateElements() {
				return b.spendSteps(int64(v.LengthInt()) * iterationSteps)
			}
			return nil
		}
	}
	return func(v cty.Value) *limitError { return checkValue(b, v, plainCost) }
}

// evaluate evaluates expr in ctx, whose functions must be bound to b (see
// budgetFuncs), checks the result against the value limits and words
// limit errors as such.
func evaluate(expr hcl.Expression, ctx *hcl.EvalContext, b *budget) (cty.Value, hcl.Diagnostics) {
	if b.err != nil && b.reported {
		// The configuration is already in error; evaluating more of it
		// would only fail again, at length.
		return cty.DynamicVal, nil
	}
	v, diags := expr.Value(ctx)
	diags = rewriteLimitDiags(diags, b, expr.Range())
	if diags.HasErrors() {
		return v, diags
	}
	if checkedByGuard(expr) || isVariable(expr) {
		// A guard has just checked this very value (or the one argument
		// it regroups), or it is a variable's value, checked when it was
		// given: walking it again would only cost the time (a second
		// for a set of 100,000 strings, which cty sorts to iterate).
		return v, diags
	}
	if err := checkValue(b, v, plainCost); err != nil {
		return cty.DynamicVal, append(diags, valueDiag(err, expr.Range()))
	}
	return v, diags
}

// checkedByGuard reports whether the value of expr is checked by a guard as it
// is produced: a guardOut call, or a regroups call of a guarded argument.
func checkedByGuard(expr hcl.Expression) bool {
	call, ok := expr.(*hclsyntax.FunctionCallExpr)
	if !ok {
		return false
	}
	switch {
	case call.Name == guardOut:
		return true
	case regroups[call.Name] && len(call.Args) == 1:
		arg, ok := call.Args[0].(*hclsyntax.FunctionCallExpr)
		return ok && arg.Name == guardIn
	}
	return false
}

// isVariable reports whether expr is a bare var.NAME, whose value
// convertVar has checked.
func isVariable(expr hcl.Expression) bool {
	t, ok := expr.(*hclsyntax.ScopeTraversalExpr)
	if !ok || len(t.Traversal) != 2 || t.Traversal.RootName() != "var" {
		return false
	}
	_, ok = t.Traversal[1].(hcl.TraverseAttr)
	return ok
}

// guardFile inserts the guards into every expression of a parsed file but
// those of a workflow's activities, which guardActivity guards as each is
// loaded (nothing evaluates an activity's expressions before): the guards
// of 10,000 activities are 2.5 MB, and at the end of the parse the whole
// syntax tree is live, the most the load ever holds. A variable block's
// type is left alone: it is a type expression, read by its syntax, never
// evaluated.
func guardFile(f *hcl.File) {
	if body, ok := f.Body.(*hclsyntax.Body); ok {
		guardBody(body, "")
	}
}

// guardActivity inserts the guards into the expressions of an activity
// block of a workflow, which guardFile left out.
func guardActivity(b *hcl.Block) {
	if body, ok := b.Body.(*hclsyntax.Body); ok {
		guardBody(body, "activity")
	}
}

func guardBody(body *hclsyntax.Body, blockType string) {
	for name, attr := range body.Attributes {
		if blockType == "variable" && name == "type" {
			continue
		}
		attr.Expr = guardExpr(attr.Expr)
	}
	for _, b := range body.Blocks {
		if blockType == "workflow" && b.Type == "activity" {
			continue // guardActivity's, when the activity is loaded
		}
		guardBody(b.Body, b.Type)
	}
}

func guardCall(name string, e hclsyntax.Expression) hclsyntax.Expression {
	rng := e.Range()
	at := func(p hcl.Pos) hcl.Range { return hcl.Range{Filename: rng.Filename, Start: p, End: p} }
	return &hclsyntax.FunctionCallExpr{
		Name:            name,
		Args:            []hclsyntax.Expression{e},
		NameRange:       at(rng.Start),
		OpenParenRange:  at(rng.Start),
		CloseParenRange: at(rng.End),
	}
}

// guardExpr returns e with guards inserted. The depth of e is bounded by
// prescan, so the recursion is too.
func guardExpr(e hclsyntax.Expression) hclsyntax.Expression {
	switch x := e.(type) {
	case *hclsyntax.FunctionCallExpr:
		if isGuard(x.Name) {
			return x
		}
		allLiteral := true
		for _, a := range x.Args {
			allLiteral = allLiteral && literal(a)
		}
		for i, a := range x.Args {
			a = guardExpr(a)
			// A call of literals only keeps the guard on its first
			// argument: once the budget is spent, that guard fails the
			// call before it runs. Without it, a loop that goes on after
			// the budget ran out (HCL evaluates every iteration of a for
			// expression, collecting errors) would still build
			// range(1000) on every iteration.
			if x.Name != "try" && x.Name != "can" && (!literal(a) || allLiteral && i == 0) {
				// try and can take expressions, not values: an error in
				// the guard is one they may catch, and the budget's
				// exhaustion sticks anyway. A literal is as large as it
				// is written, which prescan bounded; the function's own
				// pre-check (limitedfuncs.go) still sees it.
				a = guardCall(guardIn, a)
			}
			x.Args[i] = a
		}
		if regroups[x.Name] {
			// Its result is its argument regrouped, which guardIn has
			// checked: checking it again would only walk it again (and
			// walking a set sorts it: 0.2 s for 10,000 strings).
			return x
		}
		return guardCall(guardOut, x)
	case *hclsyntax.ConditionalExpr:
		x.Condition = guardExpr(x.Condition)
		x.TrueResult = guardCall(guardUnify, guardExpr(x.TrueResult))
		x.FalseResult = guardCall(guardUnify, guardExpr(x.FalseResult))
	case *hclsyntax.BinaryOpExpr:
		x.LHS, x.RHS = guardExpr(x.LHS), guardExpr(x.RHS)
		if x.Op == hclsyntax.OpEqual || x.Op == hclsyntax.OpNotEqual {
			x.LHS, x.RHS = guardCall(guardIn, x.LHS), guardCall(guardIn, x.RHS)
		}
		x.Op = guardedOp(x.Op)
	case *hclsyntax.UnaryOpExpr:
		x.Val = guardExpr(x.Val)
		x.Op = guardedOp(x.Op)
	case *hclsyntax.ForExpr:
		x.CollExpr = guardCall(guardFor, guardExpr(x.CollExpr))
		if x.KeyExpr != nil {
			x.KeyExpr = guardCall(guardOut, guardExpr(x.KeyExpr))
		}
		x.ValExpr = guardCall(guardOut, guardExpr(x.ValExpr))
		if x.CondExpr != nil {
			x.CondExpr = guardExpr(x.CondExpr)
		}
	case *hclsyntax.TemplateExpr:
		for i, p := range x.Parts {
			if _, literal := p.(*hclsyntax.LiteralValueExpr); literal {
				continue
			}
			x.Parts[i] = guardCall(guardOut, guardExpr(p))
		}
	case *hclsyntax.TemplateWrapExpr:
		x.Wrapped = guardExpr(x.Wrapped)
	case *hclsyntax.TemplateJoinExpr:
		x.Tuple = guardExpr(x.Tuple)
	case *hclsyntax.TupleConsExpr:
		for i, el := range x.Exprs {
			x.Exprs[i] = guardExpr(el)
		}
	case *hclsyntax.ObjectConsExpr:
		for i := range x.Items {
			x.Items[i].KeyExpr = guardExpr(x.Items[i].KeyExpr)
			x.Items[i].ValueExpr = guardExpr(x.Items[i].ValueExpr)
		}
	case *hclsyntax.ObjectConsKeyExpr:
		// A bare name is a literal key; only a computed key is evaluated.
		if _, bare := x.Wrapped.(*hclsyntax.ScopeTraversalExpr); !bare {
			x.Wrapped = guardExpr(x.Wrapped)
		}
	case *hclsyntax.IndexExpr:
		x.Collection, x.Key = guardExpr(x.Collection), guardExpr(x.Key)
	case *hclsyntax.SplatExpr:
		x.Source = guardCall(guardIn, guardExpr(x.Source))
	case *hclsyntax.RelativeTraversalExpr:
		x.Source = guardExpr(x.Source)
	case *hclsyntax.ParenthesesExpr:
		x.Expression = guardExpr(x.Expression)
	}
	return e
}

// guarded are HCL's arithmetic operators with a check that their result is
// in range: a chain of multiplications of in-range numbers can leave it.
var guarded = func() map[*hclsyntax.Operation]*hclsyntax.Operation {
	m := map[*hclsyntax.Operation]*hclsyntax.Operation{}
	for _, op := range []*hclsyntax.Operation{hclsyntax.OpAdd, hclsyntax.OpSubtract, hclsyntax.OpMultiply,
		hclsyntax.OpDivide, hclsyntax.OpModulo, hclsyntax.OpNegate} {
		g := *op
		g.Impl = checkedNumberFunc(op.Impl)
		m[op] = &g
	}
	return m
}()

func guardedOp(op *hclsyntax.Operation) *hclsyntax.Operation {
	if g, ok := guarded[op]; ok {
		return g
	}
	return op
}

// checkedNumberFunc wraps a function that returns a number so that a
// result out of range is an error.
func checkedNumberFunc(f function.Function) function.Function {
	return function.New(&function.Spec{
		Params:   f.Params(),
		VarParam: f.VarParam(),
		Type:     func(args []cty.Value) (cty.Type, error) { return f.ReturnTypeForValues(args) },
		Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
			v, err := f.Call(args)
			if err != nil {
				return v, err
			}
			if v.IsKnown() && !v.IsNull() && v.Type() == cty.Number {
				if le := checkNumber(v.AsBigFloat()); le != nil {
					return cty.NilVal, le
				}
			}
			return v, nil
		},
	})
}

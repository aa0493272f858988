package config

import (
	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
)

// elementOutputRefs reports an output an activity's kind does not have
// where the elements of an activity with for_each are taken together,
// which a reference's own traversal does not show:
//
//	values(activity.fetch)[*].reslt
//	[for k, f in activity.fetch : f.reslt]
//
// Without it the mistake is found only at run time, after every element
// ran. Each such use is checked as the reference activity.fetch[KEY].OUTPUT.
func elementOutputRefs(expr hcl.Expression, sc scope) hcl.Diagnostics {
	sx, ok := expr.(hclsyntax.Expression)
	if !ok || len(sc.forEach) == 0 {
		return nil
	}
	var diags hcl.Diagnostics
	check := func(name string, rest hcl.Traversal) {
		t := hcl.Traversal{hcl.TraverseRoot{Name: "activity"}, hcl.TraverseAttr{Name: name}, hcl.TraverseIndex{Key: cty.StringVal("")}}
		up := upstreamRef{name: name, kind: sc.kinds[name], forEach: true, condition: sc.condition}
		if d := checkOutputRef(append(t, rest...), up); d != nil {
			diags = append(diags, d)
		}
	}
	_ = hclsyntax.VisitAll(sx, func(n hclsyntax.Node) hcl.Diagnostics {
		switch e := n.(type) {
		case *hclsyntax.SplatExpr:
			if name, ok := sc.elementsOf(e.Source); ok {
				if rel, ok := e.Each.(*hclsyntax.RelativeTraversalExpr); ok {
					check(name, rel.Traversal)
				}
			}
		case *hclsyntax.ForExpr:
			if name, ok := sc.elementsOf(e.CollExpr); ok {
				for _, body := range []hclsyntax.Expression{e.KeyExpr, e.ValExpr, e.CondExpr} {
					if body != nil {
						for _, rest := range varSteps(body, e.ValVar) {
							check(name, rest)
						}
					}
				}
			}
		}
		return nil
	})
	return diags
}

// elementsOf reports whether expr is activity.NAME or
// values(activity.NAME) for an activity with for_each: a collection of
// its elements' outputs.
func (sc scope) elementsOf(expr hclsyntax.Expression) (string, bool) {
	expr = unguard(expr)
	if call, ok := expr.(*hclsyntax.FunctionCallExpr); ok && call.Name == "values" && len(call.Args) == 1 {
		expr = unguard(call.Args[0])
	}
	st, ok := expr.(*hclsyntax.ScopeTraversalExpr)
	if !ok || len(st.Traversal) != 2 || st.Traversal.RootName() != "activity" {
		return "", false
	}
	step, ok := st.Traversal[1].(hcl.TraverseAttr)
	if !ok || !sc.forEach[step.Name] {
		return "", false
	}
	return step.Name, true
}

// varSteps returns the steps after name of every reference to the
// variable name in expr, leaving out those inside a nested for expression
// that declares a variable of the same name.
func varSteps(expr hclsyntax.Expression, name string) []hcl.Traversal {
	var refs []*hclsyntax.ScopeTraversalExpr
	var shadows []hcl.Range
	_ = hclsyntax.VisitAll(expr, func(n hclsyntax.Node) hcl.Diagnostics {
		switch e := n.(type) {
		case *hclsyntax.ForExpr:
			if e.KeyVar == name || e.ValVar == name {
				shadows = append(shadows, e.SrcRange)
			}
		case *hclsyntax.ScopeTraversalExpr:
			if e.Traversal.RootName() == name && len(e.Traversal) > 1 {
				refs = append(refs, e)
			}
		}
		return nil
	})
	var out []hcl.Traversal
next:
	for _, r := range refs {
		for _, sh := range shadows {
			if sh.ContainsOffset(r.SrcRange.Start.Byte) {
				continue next
			}
		}
		out = append(out, r.Traversal[1:])
	}
	return out
}

// unguard returns expr without the guards guardExpr put around it.
func unguard(expr hclsyntax.Expression) hclsyntax.Expression {
	for {
		call, ok := expr.(*hclsyntax.FunctionCallExpr)
		if !ok || !isGuard(call.Name) || len(call.Args) != 1 {
			return expr
		}
		expr = call.Args[0]
	}
}

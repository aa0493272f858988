package config

import (
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
)

type local struct {
	name  string
	attr  *hcl.Attribute
	state int // 0 new, 1 evaluating, 2 done
}

var localsScope = scope{where: "locals"}

func (l *loader) loadLocals(blocks []*hcl.Block) {
	l.locals = make(map[string]*local)
	l.localVals = make(map[string]cty.Value)
	var order []*local
	for _, b := range blocks {
		attrs, d := b.Body.JustAttributes()
		l.addDiags(d)
		for _, a := range sortedAttrs(attrs) {
			if prev, dup := l.locals[a.Name]; dup {
				l.duplicate("local value", a.Name, a.NameRange, prev.attr.NameRange)
				continue
			}
			lc := &local{name: a.Name, attr: a}
			l.locals[a.Name] = lc
			order = append(order, lc)
		}
	}
	for _, lc := range order {
		l.evalLocal(lc, nil)
	}
	l.staticCache = nil // built from the final values from now on
}

// evalLocal evaluates lc after the locals it refers to (depth first);
// stack is the chain being evaluated, used to name a cycle.
func (l *loader) evalLocal(lc *local, stack []string) {
	if lc.state == 2 {
		return
	}
	if lc.state == 1 {
		// Reported by the caller that closed the cycle.
		return
	}
	lc.state = 1
	stack = append(stack, lc.name)
	if _, ok := l.checkRefs(lc.attr.Expr, localsScope); !ok {
		l.localVals[lc.name] = cty.DynamicVal
		lc.state = 2
		return
	}
	failed := false
	for _, t := range lc.attr.Expr.Variables() {
		if t.RootName() != "local" {
			continue
		}
		name, _ := traversalName(t)
		dep := l.locals[name]
		if dep.state == 1 {
			rng := t.SourceRange()
			cycle := append(append([]string{}, stack[indexOf(stack, name):]...), name)
			l.errorf(&rng, "Cycle in local values",
				"Local values refer to each other in a loop: %s. Break the loop by computing one of them without the others.",
				"local."+strings.Join(cycle, " -> local."))
			failed = true
			continue
		}
		l.evalLocal(dep, stack)
		if l.localVals[name].RawEquals(cty.DynamicVal) {
			// It failed and said why; this one can only fail with it.
			failed = true
		}
	}
	lc.state = 2
	if failed {
		l.localVals[lc.name] = cty.DynamicVal
		return
	}
	v, d := l.evalLoad(lc.attr.Expr)
	l.addDiags(d)
	if d.HasErrors() {
		v = cty.DynamicVal
	}
	l.localVals[lc.name] = v
}

func indexOf(s []string, x string) int {
	for i, e := range s {
		if e == x {
			return i
		}
	}
	return 0
}

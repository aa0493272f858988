package config

import (
	"encoding/json"
	"fmt"
	"sort"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
)

// Output is a workflow's output block: a value computed from variables,
// locals and the outputs of its activities once they have ended.
type Output struct {
	Name        string
	Description string
	// Sensitive hides the value in human output (wf output, the apply's
	// summary); a value derived from a sensitive variable is hidden too.
	Sensitive bool
	// Deps are the activities the value refers to: it is known once all
	// of them have ended.
	Deps      []string
	DeclRange hcl.Range

	expr  hcl.Expression
	vars  map[string]cty.Value
	funcs func(vars map[string]cty.Value, b *budget) *hcl.EvalContext
	// forEach lists which Deps have for_each (their value is a map of
	// elements).
	forEach map[string]bool
}

// IsForEach reports whether the dependency dep of the output has
// for_each, so that its value must be an ElementsValue.
func (o *Output) IsForEach(dep string) bool { return o.forEach[dep] }

var outputSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "value", Required: true},
		{Name: "description"},
		{Name: "sensitive"},
	},
}

// OutputValue is an evaluated output.
type OutputValue struct {
	// Value is the value as JSON.
	Value json.RawMessage
	// Type is the value's type as cty's JSON type syntax ("string",
	// ["list","number"], ...).
	Type json.RawMessage
	// Sensitive says the value must not be shown to humans.
	Sensitive bool
}

// Eval evaluates the output. upstream maps each of Deps to its
// UpstreamValue (an ElementsValue for an activity with for_each).
func (o *Output) Eval(upstream map[string]cty.Value) (OutputValue, hcl.Diagnostics) {
	acts := make(map[string]cty.Value, len(o.Deps))
	for _, d := range o.Deps {
		v, ok := upstream[d]
		if !ok || v == cty.NilVal {
			return OutputValue{}, hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Output not known yet",
				Detail: fmt.Sprintf("output %q refers to activity.%s, which has not ended.", o.Name, d), Subject: o.DeclRange.Ptr()}}
		}
		acts[d] = v
	}
	vars := make(map[string]cty.Value, len(o.vars)+1)
	for k, v := range o.vars {
		vars[k] = v
	}
	vars["activity"] = cty.ObjectVal(acts)
	b := newBudget(runLimits)
	v, d := evaluate(o.expr, o.funcs(vars, b), b)
	if d.HasErrors() {
		return OutputValue{}, d
	}
	plain, secrets := unmarkSensitive(v)
	out := OutputValue{Sensitive: o.Sensitive || len(secrets) > 0 || isSensitive(v)}
	if !plain.IsWhollyKnown() {
		return OutputValue{}, hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Output not known yet",
			Detail: fmt.Sprintf("output %q is not known yet.", o.Name), Subject: o.DeclRange.Ptr()}}
	}
	val, err := ctyMarshal(plain)
	if err != nil {
		return OutputValue{}, hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Invalid output value",
			Detail: fmt.Sprintf("output %q: %v", o.Name, err), Subject: o.DeclRange.Ptr()}}
	}
	ty, err := plain.Type().MarshalJSON()
	if err != nil {
		return OutputValue{}, hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Invalid output value",
			Detail: fmt.Sprintf("output %q: %v", o.Name, err), Subject: o.DeclRange.Ptr()}}
	}
	out.Value, out.Type = val, ty
	return out, nil
}

// loadOutputs decodes a workflow's output blocks.
func (l *loader) loadOutputs(w *Workflow, blocks []*hcl.Block, sc scope) {
	seen := map[string]hcl.Range{}
	for _, b := range blocks {
		name := b.Labels[0]
		if prev, dup := seen[name]; dup {
			l.duplicate("output", name, b.DefRange, prev)
			continue
		}
		seen[name] = b.DefRange
		content, d := b.Body.Content(outputSchema)
		l.addDiags(d)
		if content == nil || d.HasErrors() {
			continue
		}
		o := &Output{Name: name, DeclRange: b.DefRange, vars: l.staticVars(), forEach: map[string]bool{}}
		if a, ok := content.Attributes["description"]; ok {
			if v, ok := l.evalStatic(a.Expr, scope{where: "an output description"}); ok && !v.IsNull() {
				s, d := parseString(v, a.Expr, "description")
				if d != nil {
					l.addDiags(hcl.Diagnostics{d})
				}
				o.Description = s
			}
		}
		if a, ok := content.Attributes["sensitive"]; ok {
			if v, ok := l.literal(a.Expr); ok {
				bv, d := conv(v, cty.Bool, a.Expr, "sensitive")
				switch {
				case d != nil:
					l.addDiags(hcl.Diagnostics{d})
				case !bv.IsNull():
					o.Sensitive = bv.True()
				}
			}
		}
		attr := content.Attributes["value"]
		osc := sc
		osc.where = fmt.Sprintf("output %q", name)
		osc.self = ""
		refs, ok := l.checkRefs(attr.Expr, osc)
		if !ok {
			continue
		}
		deps := map[string]bool{}
		for _, r := range refs {
			deps[r.name] = true
		}
		o.Deps = keysOf(deps)
		for _, dep := range o.Deps {
			if sc.forEach[dep] {
				o.forEach[dep] = true
			}
		}
		sort.Strings(o.Deps)
		o.expr = attr.Expr
		calls := calledFunctions(attr.Expr)
		funcs := l.runFuncs
		o.funcs = func(vars map[string]cty.Value, b *budget) *hcl.EvalContext {
			return withBudgetLayer(funcs, b, calls)(vars)
		}
		// What can be known now: the type, and whether it is a secret.
		acts := map[string]cty.Value{}
		for _, dep := range o.Deps {
			acts[dep] = cty.DynamicVal
		}
		vars := map[string]cty.Value{"activity": cty.ObjectVal(acts)}
		for k, v := range l.scopedVars(attr.Expr) {
			vars[k] = v
		}
		v, d := evaluate(attr.Expr, l.ctxWith(vars), l.budget)
		l.addDiags(d)
		if d.HasErrors() {
			continue
		}
		if isSensitive(v) && !o.Sensitive {
			l.errorf(attr.Expr.Range().Ptr(), "Output refers to sensitive values",
				"The value of output %q is derived from a sensitive variable. Add sensitive = true to the output block to confirm that it may be given to whoever asks wf output for it (it is then shown as (sensitive) to humans).", name)
			continue
		}
		w.Outputs = append(w.Outputs, o)
	}
}

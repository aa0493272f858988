package config

import (
	"encoding/json"
	"fmt"
	"sort"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
)

// TriggerRule says which endings of its upstream activities let an
// activity run (SPEC §10).
type TriggerRule string

const (
	// TriggerAllSucceeded (the default) runs once every upstream
	// succeeded; the activity is skipped as soon as one did not.
	TriggerAllSucceeded TriggerRule = "all_succeeded"
	// TriggerAllDone runs once every upstream ended, however.
	TriggerAllDone TriggerRule = "all_done"
	// TriggerAnyFailed runs once every upstream ended and one of them
	// failed (or was skipped because something before it failed):
	// fallbacks and compensation.
	TriggerAnyFailed TriggerRule = "any_failed"
)

var triggerRules = []string{string(TriggerAllSucceeded), string(TriggerAllDone), string(TriggerAnyFailed)}

// Handles reports whether an activity with this rule, when it succeeds,
// handles the failure of an upstream activity: the run then does not fail
// because of it.
func (t TriggerRule) Handles() bool { return t == TriggerAllDone || t == TriggerAnyFailed }

// Status values of activity.NAME.status in a when expression.
const (
	StatusSucceeded = "succeeded"
	StatusFailed    = "failed"
	StatusSkipped   = "skipped"
)

// Condition is an activity's when expression.
type Condition struct {
	Range hcl.Range
	expr  hcl.Expression
	vars  map[string]cty.Value
	funcs func(vars map[string]cty.Value, b *budget) *hcl.EvalContext
	deps  []string
}

// Upstream is how an upstream activity ended, as downstream expressions
// see it: activity.NAME.<output>, .error, and in when also .status.
type Upstream struct {
	Kind Kind
	// Status is succeeded, failed or skipped.
	Status string
	// Outputs are the stored outputs of a succeeded activity.
	Outputs json.RawMessage
	// ErrorType and ErrorMessage are the last error of a failed one.
	ErrorType, ErrorMessage string
	// HasError tells a failure without a type from none.
	HasError bool
}

// UpstreamValue is what activity.NAME evaluates to in kind blocks and
// outputs: the activity's outputs, and error (null unless it failed). A
// failed or skipped activity has every output of its kind, null.
func UpstreamValue(u Upstream) (cty.Value, error) {
	return upstreamValue(u, false)
}

// ConditionValue is what activity.NAME evaluates to in when: as
// UpstreamValue, plus status, how the activity ended. For an http activity
// this status replaces the response status, which when does not see.
func ConditionValue(u Upstream) (cty.Value, error) {
	return upstreamValue(u, true)
}

var errorValueType = cty.Object(map[string]cty.Type{"type": cty.String, "message": cty.String})

func upstreamValue(u Upstream, condition bool) (cty.Value, error) {
	attrs := map[string]cty.Value{}
	if u.Status == StatusSucceeded {
		v, err := OutputsValue(u.Outputs)
		if err != nil {
			return cty.NilVal, err
		}
		for name, av := range v.AsValueMap() {
			attrs[name] = av
		}
	}
	for _, o := range kindOutputs[u.Kind] {
		if _, ok := attrs[o]; !ok {
			attrs[o] = cty.NullVal(cty.DynamicPseudoType)
		}
	}
	attrs["error"] = cty.NullVal(errorValueType)
	if u.HasError || u.ErrorType != "" {
		attrs["error"] = cty.ObjectVal(map[string]cty.Value{"type": cty.StringVal(u.ErrorType), "message": cty.StringVal(u.ErrorMessage)})
	}
	if condition {
		attrs["status"] = cty.StringVal(u.Status)
	}
	return cty.ObjectVal(attrs), nil
}

// ElementsValue is what activity.NAME evaluates to for an activity with
// for_each: an object of its elements' values by key.
func ElementsValue(elems map[string]cty.Value) cty.Value {
	return cty.ObjectVal(elems)
}

// Condition evaluates the activity's when expression; an activity without
// one is always run. upstream maps the upstream activities it refers to
// to their ConditionValue.
func (a *Activity) Condition(upstream map[string]cty.Value) (bool, hcl.Diagnostics) {
	c := a.When
	if c == nil {
		return true, nil
	}
	acts := make(map[string]cty.Value, len(c.deps))
	for _, d := range c.deps {
		v, ok := upstream[d]
		if !ok || v == cty.NilVal {
			return false, hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Upstream not known",
				Detail:  fmt.Sprintf("when refers to activity.%s, which has not ended yet.", d),
				Subject: c.Range.Ptr()}}
		}
		acts[d] = v
	}
	vars := make(map[string]cty.Value, len(c.vars)+2)
	for k, v := range c.vars {
		vars[k] = v
	}
	vars["activity"] = cty.ObjectVal(acts)
	if a.each != cty.NilVal {
		vars["each"] = a.each
	}
	b := newBudget(runLimits)
	v, d := evaluate(c.expr, c.funcs(vars, b), b)
	if d.HasErrors() {
		return false, d
	}
	v, _ = v.UnmarkDeep()
	if v.Type() != cty.Bool || !v.IsKnown() || v.IsNull() {
		return false, hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Invalid when",
			Detail: fmt.Sprintf("when must be true or false, got %s.", describe(v)), Subject: c.Range.Ptr()}}
	}
	return v.True(), nil
}

// loadTriggerRule decodes trigger_rule.
func (l *loader) loadTriggerRule(a *Activity, attr *hcl.Attribute) {
	v, ok := l.evalStatic(attr.Expr, scope{where: "trigger_rule"})
	if !ok || v.IsNull() {
		return
	}
	s, d := parseString(v, attr.Expr, "trigger_rule")
	if d != nil {
		l.addDiags(hcl.Diagnostics{d})
		return
	}
	for _, r := range triggerRules {
		if s == r {
			a.TriggerRule = TriggerRule(s)
			return
		}
	}
	l.errorf(attr.Expr.Range().Ptr(), "Invalid trigger_rule",
		"trigger_rule must be \"all_succeeded\" (the default), \"all_done\" or \"any_failed\", got %q.%s", s, didYouMean(s, triggerRules))
}

// loadWhen checks when and returns its activity references.
func (l *loader) loadWhen(a *Activity, attr *hcl.Attribute, sc scope) []ref {
	sc.where = fmt.Sprintf("the when of activity %q", a.Name)
	sc.condition = true
	refs, ok := l.checkRefs(attr.Expr, sc)
	if !ok {
		return refs
	}
	c := &Condition{Range: attr.Expr.Range(), expr: attr.Expr, vars: l.staticVars()}
	calls := calledFunctions(attr.Expr)
	funcs := l.runFuncs
	c.funcs = func(vars map[string]cty.Value, b *budget) *hcl.EvalContext {
		return withBudgetLayer(funcs, b, calls)(vars)
	}
	seen := map[string]bool{}
	for _, r := range refs {
		if !seen[r.name] {
			seen[r.name] = true
			c.deps = append(c.deps, r.name)
		}
	}
	sort.Strings(c.deps)
	// The type, with the upstream values unknown.
	acts := map[string]cty.Value{}
	for _, dep := range c.deps {
		acts[dep] = cty.DynamicVal
	}
	vars := map[string]cty.Value{"activity": cty.ObjectVal(acts)}
	for k, v := range l.scopedVars(attr.Expr) {
		vars[k] = v
	}
	if sc.each {
		vars["each"] = unknownEach
	}
	v, d := evaluate(attr.Expr, l.ctxWith(vars), l.budget)
	l.addDiags(d)
	if d.HasErrors() {
		return refs
	}
	if ty := v.Type(); ty != cty.Bool && ty != cty.DynamicPseudoType {
		l.errorf(attr.Expr.Range().Ptr(), "Invalid when", "when must be a bool expression, but this one is a %s.", ty.FriendlyName())
		return refs
	}
	a.When = c
	return refs
}

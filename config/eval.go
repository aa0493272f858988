package config

import (
	"fmt"
	"math/big"
	"sort"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"
)

// scope says which references an expression may contain.
type scope struct {
	// where names the place for messages, e.g. "a workflow key".
	where string
	// activities, when non-nil, allows activity.NAME for these names.
	activities map[string]bool
	// kinds gives the kind of each activity in activities ("" when it has
	// none or several), to check activity.NAME.OUTPUT names.
	kinds map[string]Kind
	// self is the activity the expression belongs to (a self reference is
	// an error).
	self string
	// forEach says which activities have for_each (their outputs follow
	// an element key).
	forEach map[string]bool
	// each allows each.key and each.value (an activity with for_each).
	each bool
	// condition is a when expression: activity.NAME.status and .error
	// say how an upstream ended.
	condition bool
	// noSensitive forbids values derived from sensitive variables (an
	// instance key is shown everywhere).
	noSensitive bool
	// extra are additional root names (retry_if's error, attempt, elapsed).
	extra map[string]bool
	// noLocals forbids local.* (variable files and defaults).
	noLocals bool
	// literal forbids every reference.
	literal bool
}

// ref is one activity reference found in an expression.
type ref struct {
	name string
	rng  hcl.Range
}

// traversalName returns the name in the second step of a traversal such as
// var.NAME or var["NAME"].
func traversalName(t hcl.Traversal) (string, bool) {
	if len(t) < 2 {
		return "", false
	}
	switch s := t[1].(type) {
	case hcl.TraverseAttr:
		return s.Name, true
	case hcl.TraverseIndex:
		if s.Key.Type() == cty.String && s.Key.IsKnown() && !s.Key.IsNull() {
			return s.Key.AsString(), true
		}
	}
	return "", false
}

// checkRefs validates every reference of expr against sc and returns the
// activity references. ok is false when any reference is invalid, in which
// case the expression must not be evaluated (that would only repeat the
// problem in HCL's vaguer words).
func (l *loader) checkRefs(expr hcl.Expression, sc scope) (refs []ref, ok bool) {
	ok = l.checkFuncs(expr)
	for _, t := range expr.Variables() {
		rng := t.SourceRange()
		root := t.RootName()
		if sc.extra[root] {
			continue
		}
		if sc.literal {
			l.errorf(&rng, "Variables not allowed", "%s cannot refer to anything; it must be a literal value.", capitalize(sc.where))
			ok = false
			continue
		}
		name, named := traversalName(t)
		switch root {
		case "var":
			if !named {
				l.errorf(&rng, "Invalid reference", "A reference to an input variable must name it, like var.NAME.")
				ok = false
			} else if _, found := l.vars[name]; !found {
				l.errorf(&rng, "Reference to undeclared input variable",
					"An input variable named %q has not been declared.%s Declare it with a variable %q block.", name, didYouMean(name, keysOf(l.vars)), name)
				ok = false
			}
		case "local":
			switch {
			case sc.noLocals:
				l.errorf(&rng, "Invalid reference", "Local values cannot be used in %s.", sc.where)
				ok = false
			case !named:
				l.errorf(&rng, "Invalid reference", "A reference to a local value must name it, like local.NAME.")
				ok = false
			default:
				if _, found := l.locals[name]; !found {
					l.errorf(&rng, "Reference to undeclared local value",
						"A local value named %q has not been declared in a locals block.%s", name, didYouMean(name, keysOf(l.locals)))
					ok = false
				}
			}
		case "activity":
			switch {
			case sc.activities == nil:
				l.errorf(&rng, "Invalid reference",
					"Activity outputs cannot be used in %s: they are only known during a run, so only an activity's exec, http or sleep block may reference them.", sc.where)
				ok = false
			case !named:
				l.errorf(&rng, "Invalid reference", "A reference to an activity must name it, like activity.NAME.result.")
				ok = false
			case name == sc.self:
				l.errorf(&rng, "Self-referential activity",
					"Activity %q cannot refer to its own outputs: they only exist once it has finished.", name)
				ok = false
			case !sc.activities[name]:
				l.errorf(&rng, "Reference to undeclared activity",
					"There is no activity named %q in this workflow.%s", name, didYouMean(name, keysOf(sc.activities)))
				ok = false
			default:
				refs = append(refs, ref{name: name, rng: rng})
				up := upstreamRef{name: name, kind: sc.kinds[name], forEach: sc.forEach[name], condition: sc.condition}
				if d := checkOutputRef(t, up); d != nil {
					l.addDiags(hcl.Diagnostics{d})
					ok = false
				}
			}
		case "each":
			switch {
			case !sc.each:
				l.errorf(&rng, "Invalid reference",
					"each.key and each.value are only available in the kind block and the when expression of an activity with for_each; %s has no each.", sc.where)
				ok = false
			case !named || (name != "key" && name != "value"):
				l.errorf(&rng, "Unsupported attribute",
					"each has only key and value.%s", didYouMean(name, []string{"key", "value"}))
				ok = false
			}
		case "retry_policy", "retry_budget":
			l.errorf(&rng, "Invalid reference",
				"%s.NAME can only be used as the value of %s.", root, map[string]string{
					"retry_policy": "an activity's retry attribute or a retry block's policy attribute",
					"retry_budget": "a retry policy's budget attribute",
				}[root])
			ok = false
		default:
			allowed := []string{"var"}
			if !sc.noLocals {
				allowed = append(allowed, "local")
			}
			if sc.activities != nil {
				allowed = append(allowed, "activity")
			}
			if sc.each {
				allowed = append(allowed, "each")
			}
			for e := range sc.extra {
				allowed = append(allowed, e)
			}
			sort.Strings(allowed[1:])
			l.errorf(&rng, "Unknown reference",
				"There is nothing named %q to refer to in %s.%s Valid references here start with %s.",
				root, sc.where, didYouMean(root, append(allowed, "retry_policy", "retry_budget")), strings.Join(allowed, ", "))
			ok = false
		}
	}
	if ok {
		if d := elementOutputRefs(expr, sc); len(d) > 0 {
			l.addDiags(d)
			ok = false
		}
	}
	return refs, ok
}

// evalStatic checks and evaluates an expression that must be known at load
// time. ok is false when a diagnostic was recorded.
func (l *loader) evalStatic(expr hcl.Expression, sc scope) (cty.Value, bool) {
	if _, ok := l.checkRefs(expr, sc); !ok {
		return cty.DynamicVal, false
	}
	v, d := l.evalLoad(expr)
	l.addDiags(d)
	if d.HasErrors() {
		return cty.DynamicVal, false
	}
	if isSensitive(v) {
		if sc.noSensitive {
			rng := expr.Range()
			l.errorf(&rng, "Sensitive value not allowed",
				"%s is shown wherever wf shows the instance, so it cannot be derived from a sensitive variable.", capitalize(sc.where))
			return cty.DynamicVal, false
		}
		v, _ = v.UnmarkDeep()
	}
	if !v.IsWhollyKnown() {
		// Only an earlier failure (an invalid variable or local, kept as
		// unknown) can make a static value unknown; that one was reported.
		if !l.diags.HasErrors() {
			rng := expr.Range()
			l.errorf(&rng, "Value not known", "This value cannot be determined when the configuration is loaded.")
		}
		return cty.DynamicVal, false
	}
	return v, true
}

// typeErr reports a value that does not convert to the wanted type.
func typeErr(expr hcl.Expression, attr string, err error) *hcl.Diagnostic {
	rng := expr.Range()
	return &hcl.Diagnostic{
		Severity: hcl.DiagError,
		Summary:  "Incorrect attribute value type",
		Detail:   fmt.Sprintf("Inappropriate value for attribute %q: %s.", attr, convertMsg(err)),
		Subject:  &rng,
	}
}

func convertMsg(err error) string {
	if pe, ok := err.(cty.PathError); ok && len(pe.Path) > 0 {
		return fmt.Sprintf("element %s: %s", formatPath(pe.Path), pe.Error())
	}
	return err.Error()
}

func formatPath(p cty.Path) string {
	var sb strings.Builder
	for _, s := range p {
		switch s := s.(type) {
		case cty.GetAttrStep:
			sb.WriteString("." + s.Name)
		case cty.IndexStep:
			switch {
			case s.Key.Type() == cty.String:
				fmt.Fprintf(&sb, "[%q]", s.Key.AsString())
			case s.Key.Type() == cty.Number:
				fmt.Fprintf(&sb, "[%s]", s.Key.AsBigFloat().Text('f', -1))
			default:
				sb.WriteString("[?]")
			}
		}
	}
	return strings.TrimPrefix(sb.String(), ".")
}

// conv converts v to ty, reporting failures against attr. A null stays null
// (it means "not set").
func conv(v cty.Value, ty cty.Type, expr hcl.Expression, attr string) (cty.Value, *hcl.Diagnostic) {
	if v.IsNull() {
		return cty.NullVal(ty), nil
	}
	out, err := convert.Convert(v, ty)
	if err != nil {
		return cty.NilVal, typeErr(expr, attr, err)
	}
	if out.IsKnown() && !out.IsNull() && (ty.IsListType() || ty.IsMapType()) {
		for it := out.ElementIterator(); it.Next(); {
			k, e := it.Element()
			if e.IsKnown() && e.IsNull() {
				return cty.NilVal, typeErr(expr, attr, cty.Path{cty.IndexStep{Key: k}}.NewErrorf("must not be null"))
			}
		}
	}
	return out, nil
}

// Typed decoders shared by load-time evaluation and Resolve. Each takes an
// already evaluated, known, non-null value.

func parseDuration(v cty.Value, expr hcl.Expression, attr string) (time.Duration, *hcl.Diagnostic) {
	s, d := conv(v, cty.String, expr, attr)
	if d != nil {
		return 0, d
	}
	str := s.AsString()
	rng := expr.Range()
	dur, err := time.ParseDuration(str)
	if err != nil {
		return 0, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Invalid duration",
			Detail:   fmt.Sprintf("%q is not a valid duration (Go syntax, like \"250ms\" or \"1m30s\").", str),
			Subject:  &rng,
		}
	}
	if dur < 0 {
		return 0, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Invalid duration",
			Detail:   fmt.Sprintf("%q is negative; %s must be zero or more.", str, attr),
			Subject:  &rng,
		}
	}
	return dur, nil
}

func parseInt(v cty.Value, expr hcl.Expression, attr string) (int, *hcl.Diagnostic) {
	n, d := conv(v, cty.Number, expr, attr)
	if d != nil {
		return 0, d
	}
	bf := n.AsBigFloat()
	i, acc := bf.Int64()
	if !bf.IsInt() || acc != big.Exact || i > 1<<31 || i < -(1<<31) {
		rng := expr.Range()
		return 0, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Invalid number",
			Detail:   fmt.Sprintf("%s must be a whole number, got %s.", attr, bf.Text('g', 10)),
			Subject:  &rng,
		}
	}
	return int(i), nil
}

func parseInt64(v cty.Value, expr hcl.Expression, attr string) (int64, *hcl.Diagnostic) {
	n, d := conv(v, cty.Number, expr, attr)
	if d != nil {
		return 0, d
	}
	bf := n.AsBigFloat()
	i, acc := bf.Int64()
	if !bf.IsInt() || acc != big.Exact {
		rng := expr.Range()
		return 0, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Invalid number",
			Detail:   fmt.Sprintf("%s must be a whole number, got %s.", attr, bf.Text('g', 10)),
			Subject:  &rng,
		}
	}
	return i, nil
}

func parseFloat(v cty.Value, expr hcl.Expression, attr string) (float64, *hcl.Diagnostic) {
	n, d := conv(v, cty.Number, expr, attr)
	if d != nil {
		return 0, d
	}
	f, _ := n.AsBigFloat().Float64()
	return f, nil
}

func parseString(v cty.Value, expr hcl.Expression, attr string) (string, *hcl.Diagnostic) {
	s, d := conv(v, cty.String, expr, attr)
	if d != nil {
		return "", d
	}
	return s.AsString(), nil
}

func parseBool(v cty.Value, expr hcl.Expression, attr string) (bool, *hcl.Diagnostic) {
	b, d := conv(v, cty.Bool, expr, attr)
	if d != nil {
		return false, d
	}
	return b.True(), nil
}

func parseStrings(v cty.Value, expr hcl.Expression, attr string) ([]string, *hcl.Diagnostic) {
	if out, ok := plainStrings(v); ok {
		return out, nil
	}
	l, d := conv(v, cty.List(cty.String), expr, attr)
	if d != nil {
		return nil, d
	}
	out := make([]string, 0, l.LengthInt())
	for it := l.ElementIterator(); it.Next(); {
		_, e := it.Element()
		out = append(out, e.AsString())
	}
	return out, nil
}

// plainStrings reads a known tuple or list of known, non-null strings
// directly: what conv would give, without cty's conversion (which builds
// a number value per index), for argv lists resolved 10,000 times.
func plainStrings(v cty.Value) ([]string, bool) {
	ty := v.Type()
	if !v.IsKnown() || v.IsNull() || v.IsMarked() || !(ty.IsTupleType() || ty.IsListType()) {
		return nil, false
	}
	vals := v.AsValueSlice()
	out := make([]string, len(vals))
	for i, e := range vals {
		if e.IsMarked() || !e.IsKnown() || e.IsNull() || e.Type() != cty.String {
			return nil, false
		}
		out[i] = e.AsString()
	}
	return out, true
}

func parseStringMap(v cty.Value, expr hcl.Expression, attr string) (map[string]string, *hcl.Diagnostic) {
	m, d := conv(v, cty.Map(cty.String), expr, attr)
	if d != nil {
		return nil, d
	}
	out := make(map[string]string, m.LengthInt())
	for it := m.ElementIterator(); it.Next(); {
		k, e := it.Element()
		out[k.AsString()] = e.AsString()
	}
	return out, nil
}

// sortedAttrs returns attributes in source order, so that diagnostics and
// the first-reference ranges are deterministic.
func sortedAttrs(attrs hcl.Attributes) []*hcl.Attribute {
	out := make([]*hcl.Attribute, 0, len(attrs))
	for _, a := range attrs {
		out = append(out, a)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i].Range, out[j].Range
		if a.Filename != b.Filename {
			return a.Filename < b.Filename
		}
		return a.Start.Byte < b.Start.Byte
	})
	return out
}

// checkFuncs reports calls to functions that do not exist. Evaluation would
// find them too, but not behind an unknown value (`unknown && f()` is never
// evaluated at load time), and a typo must not wait for a failure at run
// time to surface.
func (l *loader) checkFuncs(expr hcl.Expression) bool {
	sx, isSyntax := expr.(hclsyntax.Expression)
	if !isSyntax {
		return true
	}
	ok := true
	_ = hclsyntax.VisitAll(sx, func(n hclsyntax.Node) hcl.Diagnostics {
		call, isCall := n.(*hclsyntax.FunctionCallExpr)
		if !isCall || isGuard(call.Name) {
			return nil
		}
		if _, found := l.funcs[call.Name]; !found {
			rng := call.NameRange
			l.errorf(&rng, "Call to unknown function", "There is no function named %q.", call.Name)
			ok = false
		}
		return nil
	})
	return ok
}

package config

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
)

// ForEach is an activity's for_each: a map, or a set of strings, with one
// element per key. Each element is an activity of its own, addressed
// activity.NAME["KEY"], with its own state, attempts, timers and
// idempotency key; each.key and each.value are in scope in its kind block
// and when.
type ForEach struct {
	// Range is the for_each expression's source range.
	Range hcl.Range
	// Deps are the activities the collection refers to: it is known once
	// they have succeeded ("known after activity.X"). Empty when it uses
	// only variables and locals, and is known when loading.
	Deps []string

	expr  hcl.Expression
	vars  map[string]cty.Value
	funcs func(vars map[string]cty.Value, b *budget) *hcl.EvalContext

	// static holds the elements when the collection is known at load
	// time (no Deps); built once, shared by every caller.
	static     []Element
	staticOnce sync.Once
	staticActs []*Activity
	block      *Activity
}

// Element is one key of a for_each and its value (each.value: the map
// value, or the key itself for a set).
type Element struct {
	Key   string
	Value cty.Value
}

// Known reports whether the collection is known without running anything.
func (f *ForEach) Known() bool { return len(f.Deps) == 0 }

// Elements returns an activity's elements, in key order. upstream holds
// the values of its upstream activities (as for Resolve); known is false
// when the collection depends on an upstream that is not in it yet. For an
// activity without for_each it returns nil, true.
func (a *Activity) Elements(upstream map[string]cty.Value) (elems []*Activity, known bool, diags hcl.Diagnostics) {
	f := a.ForEach
	if f == nil {
		return nil, true, nil
	}
	if f.Known() {
		f.staticOnce.Do(func() {
			f.staticActs = make([]*Activity, len(f.static))
			for i, e := range f.static {
				f.staticActs[i] = a.element(e)
			}
		})
		return f.staticActs, true, nil
	}
	acts := make(map[string]cty.Value, len(f.Deps))
	for _, d := range f.Deps {
		v, ok := upstream[d]
		if !ok || v == cty.NilVal {
			return nil, false, nil
		}
		acts[d] = v
	}
	vars := make(map[string]cty.Value, len(f.vars)+1)
	for k, v := range f.vars {
		vars[k] = v
	}
	vars["activity"] = cty.ObjectVal(acts)
	b := newBudget(runLimits)
	els, known, fd, d := evalForEach(f.expr, f.funcs(vars, b), b, f.Range)
	if d.HasErrors() {
		return nil, true, d
	}
	if fd != nil {
		return nil, true, hcl.Diagnostics{fd}
	}
	if !known {
		return nil, false, nil
	}
	out := make([]*Activity, len(els))
	for i, e := range els {
		out[i] = a.element(e)
	}
	return out, true, nil
}

// element makes the activity of one element.
func (a *Activity) element(e Element) *Activity {
	el := *a
	el.Name = ElementName(a.Name, e.Key)
	el.Block = a.Name
	el.Key = e.Key
	el.IsElement = true
	el.ForEach = nil
	el.each = cty.ObjectVal(map[string]cty.Value{"key": cty.StringVal(e.Key), "value": e.Value})
	return &el
}

// unknownEach is each while the element is not known (load-time checks).
var unknownEach = cty.ObjectVal(map[string]cty.Value{"key": cty.UnknownVal(cty.String), "value": cty.DynamicVal})

// evalForEach evaluates a for_each expression and lists its elements.
//
// for_each = toset(LIST) is how a fan-out over a list is written, and cty
// sorts a set each time it is iterated, comparing values through Equals:
// 0.3 s for 10,000 strings. So toset(X) with X a list or tuple of known
// strings is read as the set it makes, X sorted without duplicates, which
// is what iterating toset(X) gives; anything else is evaluated as
// written.
func evalForEach(expr hcl.Expression, ctx *hcl.EvalContext, b *budget, rng hcl.Range) ([]Element, bool, *hcl.Diagnostic, hcl.Diagnostics) {
	if call, ok := expr.(*hclsyntax.FunctionCallExpr); ok && call.Name == "toset" && len(call.Args) == 1 && !call.ExpandFinal {
		arg, d := evaluate(call.Args[0], ctx, b)
		if d.HasErrors() {
			// Evaluating it again as written would fail the same way, or
			// (the budget spent and reported) quietly give an unknown.
			return nil, true, nil, d
		}
		if els, ok := stringElements(arg); ok {
			return els, true, nil, d
		}
	}
	v, d := evaluate(expr, ctx, b)
	if d.HasErrors() {
		return nil, true, nil, d
	}
	els, known, fd := forEachElements(v, rng)
	return els, known, fd, d
}

// stringElements lists the distinct strings of a known list or tuple of
// known, non-null, unmarked strings, sorted.
func stringElements(v cty.Value) ([]Element, bool) {
	ty := v.Type()
	if v.IsMarked() || !v.IsKnown() || v.IsNull() || !(ty.IsListType() || ty.IsTupleType()) {
		return nil, false
	}
	vals := v.AsValueSlice()
	keys := make([]string, 0, len(vals))
	for _, e := range vals {
		if e.IsMarked() || !e.IsKnown() || e.IsNull() || e.Type() != cty.String {
			return nil, false
		}
		keys = append(keys, e.AsString())
	}
	sort.Strings(keys)
	keys = slices.Compact(keys)
	els := make([]Element, len(keys))
	for i, k := range keys {
		s := cty.StringVal(k)
		els[i] = Element{Key: k, Value: s}
	}
	return els, true
}

// forEachElements checks a for_each value and lists its elements, sorted
// by key. known is false when the value (or a set element) is not known
// yet.
func forEachElements(v cty.Value, rng hcl.Range) (elems []Element, known bool, diag *hcl.Diagnostic) {
	bad := func(format string, args ...any) ([]Element, bool, *hcl.Diagnostic) {
		return nil, true, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid for_each argument",
			Detail: fmt.Sprintf(format, args...), Subject: rng.Ptr()}
	}
	if v.IsMarked() {
		return bad("for_each is derived from a sensitive variable, and its keys would show in every address (activity.NAME[\"KEY\"]). Use keys that are not secret; the values of a map may be sensitive.")
	}
	ty := v.Type()
	switch {
	case !v.IsKnown():
		if ty.IsListType() || ty.IsTupleType() {
			return bad("for_each takes a map, or a set of strings, and this is a %s. Convert a list of strings with toset(...), as in for_each = toset(...).", ty.FriendlyName())
		}
		return nil, false, nil
	case v.IsNull():
		return bad("for_each must not be null: give it a map, or a set of strings (an empty one for no elements).")
	case ty.IsMapType() || ty.IsObjectType():
		for it := v.ElementIterator(); it.Next(); {
			k, e := it.Element()
			elems = append(elems, Element{Key: k.AsString(), Value: e})
		}
	case ty.IsSetType():
		if et := ty.ElementType(); et != cty.String && et != cty.DynamicPseudoType {
			return bad("for_each takes a map, or a set of strings, and this is a set of %s. Convert the elements with tostring, as in toset([for x in ... : tostring(x)]).", et.FriendlyName())
		}
		// One pass: iterating a set sorts it.
		for it := v.ElementIterator(); it.Next(); {
			_, e := it.Element()
			if !e.IsKnown() {
				return nil, false, nil
			}
			if e.IsMarked() {
				return bad("An element of the for_each set is derived from a sensitive variable, and keys show in every address (activity.NAME[\"KEY\"]).")
			}
			if e.IsNull() {
				return bad("The for_each set has a null element; every key must be a string.")
			}
			if e.Type() != cty.String {
				return bad("for_each takes a map, or a set of strings, and this set holds a %s.", e.Type().FriendlyName())
			}
			elems = append(elems, Element{Key: e.AsString(), Value: e})
		}
	case ty.IsListType() || ty.IsTupleType():
		return bad("for_each takes a map, or a set of strings, and this is a %s with %d %s. A list has no keys to address its elements by: convert it with toset(...), as in for_each = toset(...), so that each string is a key.",
			ty.FriendlyName(), v.LengthInt(), map[bool]string{true: "element", false: "elements"}[v.LengthInt() == 1])
	default:
		return bad("for_each takes a map, or a set of strings, and this is a %s.", ty.FriendlyName())
	}
	sort.Slice(elems, func(i, j int) bool { return elems[i].Key < elems[j].Key })
	return elems, true, nil
}

// ElementName is the name of an element in state, events and addresses
// (after "activity."): NAME["KEY"], the key quoted as an HCL string.
func ElementName(block, key string) string {
	return block + "[" + quoteKey(key) + "]"
}

// quoteKey writes key as an HCL string literal.
func quoteKey(key string) string {
	var b strings.Builder
	b.Grow(len(key) + 2)
	b.WriteByte('"')
	for i, r := range key {
		switch {
		case r == '"':
			b.WriteString(`\"`)
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\u%04x`, r)
		case (r == '$' || r == '%') && strings.HasPrefix(key[i+1:], "{"):
			b.WriteRune(r)
			b.WriteRune(r) // "$${" is a literal "${"
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// SplitName splits a name in state into its activity and element key:
// "fetch" gives ("fetch", "", false), `fetch["a"]` gives ("fetch", "a",
// true).
func SplitName(name string) (block, key string, isElement bool) {
	i := strings.IndexByte(name, '[')
	if i <= 0 || !strings.HasSuffix(name, "]") {
		return name, "", false
	}
	t, d := hclsyntax.ParseTraversalAbs([]byte(name), "", hcl.InitialPos)
	if d.HasErrors() || len(t) != 2 {
		return name, "", false
	}
	k, ok := indexKey(t, 1)
	if !ok {
		return name, "", false
	}
	return name[:i], k, true
}

// Address is an activity address as a user writes it: activity.NAME, or
// activity.NAME["KEY"] for an element.
type Address struct {
	Name   string
	Key    string
	HasKey bool
}

// String is the address as written: activity.NAME or activity.NAME["KEY"].
func (a Address) String() string { return "activity." + a.StateName() }

// StateName is the name the address has in state: NAME or NAME["KEY"].
func (a Address) StateName() string {
	if a.HasKey {
		return ElementName(a.Name, a.Key)
	}
	return a.Name
}

// ParseAddress parses activity.NAME or activity.NAME["KEY"] (the key a
// quoted string).
func ParseAddress(s string) (Address, error) {
	t, d := hclsyntax.ParseTraversalAbs([]byte(s), "", hcl.InitialPos)
	if d.HasErrors() {
		return Address{}, fmt.Errorf("%q is not an activity address: %s", s, d[0].Summary)
	}
	return addressOf(t, s)
}

func addressOf(t hcl.Traversal, s string) (Address, error) {
	name, named := traversalName(t)
	if t.RootName() != "activity" || !named || len(t) > 3 {
		return Address{}, fmt.Errorf("%q is not an activity address: write activity.NAME, or activity.NAME[\"KEY\"] for an element", s)
	}
	a := Address{Name: name}
	if len(t) == 3 {
		k, ok := indexKey(t, 2)
		if !ok {
			return Address{}, fmt.Errorf("%q is not an activity address: an element key is a quoted string, as in activity.NAME[\"KEY\"]", s)
		}
		a.Key, a.HasKey = k, true
	}
	return a, nil
}

// StaticKeys returns the keys of an activity with for_each known at load
// time (nil otherwise).
func (a *Activity) StaticKeys() []string {
	if a.ForEach == nil || !a.ForEach.Known() {
		return nil
	}
	out := make([]string, len(a.ForEach.static))
	for i, e := range a.ForEach.static {
		out[i] = e.Key
	}
	return out
}

// ForEachDeps lists the activities the for_each of a refers to (nil
// without for_each).
func (a *Activity) ForEachDeps() []string {
	if a.ForEach == nil {
		return nil
	}
	return a.ForEach.Deps
}

// loadForEach checks and, when it uses no activity outputs, evaluates
// for_each. It returns the activity references (dependencies).
func (l *loader) loadForEach(a *Activity, attr *hcl.Attribute, sc scope) []ref {
	sc.where = fmt.Sprintf("the for_each of activity %q", a.Name)
	sc.each = false
	refs, ok := l.checkRefs(attr.Expr, sc)
	if !ok {
		return refs
	}
	f := &ForEach{Range: attr.Expr.Range(), expr: attr.Expr, vars: l.staticVars(), block: a}
	calls := calledFunctions(attr.Expr)
	funcs := l.runFuncs
	f.funcs = func(vars map[string]cty.Value, b *budget) *hcl.EvalContext {
		return withBudgetLayer(funcs, b, calls)(vars)
	}
	seen := map[string]bool{}
	for _, r := range refs {
		if !seen[r.name] {
			seen[r.name] = true
			f.Deps = append(f.Deps, r.name)
		}
	}
	sort.Strings(f.Deps)
	if len(f.Deps) == 0 {
		els, known, fd, d := evalForEach(attr.Expr, &hcl.EvalContext{Variables: l.scopedVars(attr.Expr), Functions: l.funcs}, l.budget, f.Range)
		l.addDiags(d)
		if d.HasErrors() {
			return refs
		}
		switch {
		case fd != nil:
			l.addDiags(hcl.Diagnostics{fd})
			return refs
		case !known:
			// Only a failed variable or local is unknown here; reported.
			return refs
		}
		f.static = els
	} else {
		// Check what can be checked: a list is a list before it is known.
		acts := map[string]cty.Value{}
		for _, dep := range f.Deps {
			acts[dep] = cty.DynamicVal
		}
		vars := map[string]cty.Value{"activity": cty.ObjectVal(acts)}
		for k, v := range l.scopedVars(attr.Expr) {
			vars[k] = v
		}
		v, d := evaluate(attr.Expr, l.ctxWith(vars), l.budget)
		l.addDiags(d)
		if d.HasErrors() {
			return refs
		}
		if _, _, fd := forEachElements(v, f.Range); fd != nil {
			l.addDiags(hcl.Diagnostics{fd})
			return refs
		}
	}
	a.ForEach = f
	return refs
}

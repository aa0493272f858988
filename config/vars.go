package config

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/ext/typeexpr"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	hcljson "github.com/hashicorp/hcl/v2/json"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"
)

// envVarPrefix marks environment variables that set input variables.
const envVarPrefix = "WF_VAR_"

type variable struct {
	name       string
	ty         cty.Type
	defaults   *typeexpr.Defaults
	hasDefault bool
	def        cty.Value
	declRange  hcl.Range
	// sensitive marks the value (and everything derived from it) as a
	// secret: shown as "(sensitive)", removed from activities' output.
	sensitive bool
	// failed is set when the declaration itself is broken; its value is
	// then unknown so that uses of it do not pile up more diagnostics.
	failed bool
}

var variableSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "type"},
		{Name: "default"},
		{Name: "description"},
		{Name: "sensitive"},
	},
}

// noRefs is the scope of values that must be literal: defaults and
// variable files (like Terraform, they cannot refer to anything).
var noRefs = scope{where: "a variable value", noLocals: true, literal: true}

func (l *loader) loadVariables(blocks []*hcl.Block) {
	l.vars = make(map[string]*variable)
	l.varVals = make(map[string]cty.Value)
	var order []*variable
	for _, b := range blocks {
		name := b.Labels[0]
		if prev, dup := l.vars[name]; dup {
			l.duplicate("variable", name, b.DefRange, prev.declRange)
			continue
		}
		v := &variable{name: name, ty: cty.DynamicPseudoType, declRange: b.DefRange}
		l.vars[name] = v
		order = append(order, v)
		content, d := b.Body.Content(variableSchema)
		l.addDiags(d)
		if d.HasErrors() {
			v.failed = true
			continue
		}
		if a, ok := content.Attributes["type"]; ok {
			ty, defs, d := typeexpr.TypeConstraintWithDefaults(a.Expr)
			l.addDiags(d)
			if d.HasErrors() {
				v.failed = true
				continue
			}
			v.ty, v.defaults = ty, defs
		}
		if a, ok := content.Attributes["description"]; ok {
			if val, ok := l.literal(a.Expr); ok {
				if _, d := conv(val, cty.String, a.Expr, "description"); d != nil {
					l.addDiags(hcl.Diagnostics{d})
				}
			}
		}
		if a, ok := content.Attributes["sensitive"]; ok {
			if val, ok := l.literal(a.Expr); ok {
				b, d := conv(val, cty.Bool, a.Expr, "sensitive")
				switch {
				case d != nil:
					l.addDiags(hcl.Diagnostics{d})
				case !b.IsNull():
					v.sensitive = b.True()
				}
			}
		}
		if a, ok := content.Attributes["default"]; ok {
			val, ok := l.literal(a.Expr)
			if !ok {
				v.failed = true
				continue
			}
			val, ok = l.convertVar(v, val, a.Expr.Range(), "the default value")
			if !ok {
				v.failed = true
				continue
			}
			v.hasDefault, v.def = true, val
		}
	}

	// Later sources win: environment, *.auto.wfvars, -var-file, -var.
	set := make(map[string]cty.Value)
	l.varsFromEnv(set)
	var autos []string
	for name := range l.files {
		if isAutoVars(name) {
			autos = append(autos, name)
		}
	}
	sort.Strings(autos)
	// unread is set when a variable file could not be read or parsed: a
	// variable it may have set is then not reported missing as well.
	unread := false
	for _, name := range autos {
		unread = !l.varsFromFile(l.diagName(name), l.files[name], set) || unread
	}
	for _, path := range l.opts.VarFiles {
		src, ok := l.files[path]
		if !ok {
			b, err := os.ReadFile(path)
			if err != nil {
				l.errorf(nil, "Cannot read variable file", "read -var-file %s: %v", path, err)
				unread = true
				continue
			}
			src = b
		}
		unread = !l.varsFromFile(path, src, set) || unread
	}
	l.varsFromFlags(set)

	for _, v := range order {
		name := v.name
		switch val, given := set[name]; {
		case v.failed:
			l.varVals[name] = cty.DynamicVal
		case given:
			l.varVals[name] = val
		case v.hasDefault:
			l.varVals[name] = v.def
		case unread:
			l.varVals[name] = cty.DynamicVal
		default:
			l.errorf(v.declRange.Ptr(), "No value for required variable",
				"The variable %q has no default, so a value must be given with -var, -var-file, a *.auto.wfvars file or the %s%s environment variable.",
				name, envVarPrefix, name)
			l.varVals[name] = cty.DynamicVal
		}
		if v.sensitive && !v.failed {
			val := l.varVals[name]
			l.sensitive = appendLeaves(l.sensitive, val)
			l.varVals[name] = val.Mark(markSensitive)
		}
	}
}

// isAutoVars reports whether a file in the configuration directory is
// read for variable values: *.auto.wfvars (HCL) or *.auto.wfvars.json.
func isAutoVars(name string) bool {
	return strings.HasSuffix(name, AutoVarsSuffix) || strings.HasSuffix(name, AutoVarsJSONSuffix)
}

// literal evaluates an expression that may not refer to anything, nor
// call functions.
func (l *loader) literal(expr hcl.Expression) (cty.Value, bool) {
	if _, ok := l.checkRefs(expr, noRefs); !ok {
		return cty.DynamicVal, false
	}
	if call := userCall(expr); call != nil {
		l.errorf(call.NameRange.Ptr(), "Function calls not allowed", "Functions may not be called here.")
		return cty.DynamicVal, false
	}
	v, d := evaluate(expr, &hcl.EvalContext{Functions: l.guards}, l.budget)
	l.addDiags(d)
	return v, !d.HasErrors()
}

// userCall returns the first function call in expr that is not a guard.
func userCall(expr hcl.Expression) *hclsyntax.FunctionCallExpr {
	sx, ok := expr.(hclsyntax.Expression)
	if !ok {
		return nil
	}
	var found *hclsyntax.FunctionCallExpr
	_ = hclsyntax.VisitAll(sx, func(n hclsyntax.Node) hcl.Diagnostics {
		if call, isCall := n.(*hclsyntax.FunctionCallExpr); isCall && !isGuard(call.Name) && found == nil {
			found = call
		}
		return nil
	})
	return found
}

// convertVar applies v's type constraint (and its optional-attribute
// defaults) to val.
func (l *loader) convertVar(v *variable, val cty.Value, rng hcl.Range, what string) (cty.Value, bool) {
	if v.defaults != nil {
		val = v.defaults.Apply(val)
	}
	out, err := convert.Convert(val, v.ty)
	if err != nil {
		l.errorf(&rng, "Invalid value for variable",
			"%s of variable %q does not match its type %s: %s.", capitalize(what), v.name, typeexpr.TypeString(v.ty), convertMsg(err))
		return cty.DynamicVal, false
	}
	// A conversion can make a number of a string ("1e9999999"), so the
	// result is checked, unless it is strings made of strings: walking a
	// set means sorting it, and the given list costs the same or more.
	checked := out
	if stringsOfStrings(val, out) {
		checked = val
	}
	if le := checkValue(l.budget, checked, plainCost); le != nil {
		l.addDiags(hcl.Diagnostics{valueDiag(le, rng)})
		return cty.DynamicVal, false
	}
	return out, true
}

// stringsOfStrings reports whether out, a conversion of in, is a list or set
// of strings converted from a list or tuple of known strings: then out is
// in, less any duplicates.
func stringsOfStrings(in, out cty.Value) bool {
	ot, it := out.Type(), in.Type()
	if in.IsMarked() || !in.IsKnown() || in.IsNull() || !(ot.IsSetType() || ot.IsListType()) || ot.ElementType() != cty.String || !(it.IsListType() || it.IsTupleType()) {
		return false
	}
	for _, e := range in.AsValueSlice() {
		if e.IsMarked() || !e.IsKnown() || e.IsNull() || e.Type() != cty.String {
			return false
		}
	}
	return true
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// rawValue turns a value given as a bare string (-var, WF_VAR_) into a value
// of the variable's type: taken literally for string (and untyped)
// variables, parsed as an HCL expression otherwise, as Terraform does.
func (l *loader) rawValue(v *variable, raw, filename string, set map[string]cty.Value) {
	if v.failed {
		return
	}
	if v.ty == cty.String || v.ty == cty.DynamicPseudoType {
		set[v.name] = cty.StringVal(raw)
		return
	}
	l.sources[filename] = []byte(raw)
	if d := prescanExpression([]byte(raw), filename); d.HasErrors() {
		l.addDiags(d)
		return
	}
	parsed, d := hclsyntax.ParseExpression([]byte(raw), filename, hcl.InitialPos)
	l.addDiags(d)
	if d.HasErrors() {
		return
	}
	expr := guardExpr(parsed)
	val, ok := l.literal(expr)
	if !ok {
		return
	}
	if val, ok = l.convertVar(v, val, expr.Range(), "the value"); ok {
		set[v.name] = val
	}
}

func (l *loader) varsFromEnv(set map[string]cty.Value) {
	for _, kv := range l.opts.Env {
		k, val, found := strings.Cut(kv, "=")
		if !found || !strings.HasPrefix(k, envVarPrefix) {
			continue
		}
		// An undeclared WF_VAR_ is ignored: the environment is shared with
		// other configurations, so it is not this one's mistake.
		if v, ok := l.vars[strings.TrimPrefix(k, envVarPrefix)]; ok {
			l.rawValue(v, val, fmt.Sprintf("<value for var.%s from %s>", v.name, k), set)
		}
	}
}

func (l *loader) varsFromFlags(set map[string]cty.Value) {
	for _, kv := range l.opts.Vars {
		name, val, found := strings.Cut(kv, "=")
		name = strings.TrimSpace(name)
		if !found || name == "" {
			l.errorf(nil, "Invalid -var option",
				"The given -var option %q is not correctly specified. It must be NAME=VALUE.", kv)
			continue
		}
		v, ok := l.vars[name]
		if !ok {
			l.errorf(nil, "Value for undeclared variable",
				"A variable named %q was assigned with -var, but it is not declared.%s Declare it with a variable %q block.", name, didYouMean(name, keysOf(l.vars)), name)
			continue
		}
		l.rawValue(v, val, fmt.Sprintf("<value for var.%s>", name), set)
	}
}

// varsFromFile reads the values of one variable file into set; false when
// the file could not be parsed.
func (l *loader) varsFromFile(filename string, src []byte, set map[string]cty.Value) bool {
	l.sources[filename] = src
	isJSON := strings.HasSuffix(filename, ".json")
	var f *hcl.File
	var d hcl.Diagnostics
	if isJSON {
		f, d = parseJSONVars(src, filename)
	} else {
		f, d = parseConfig(src, filename)
	}
	l.addDiags(d)
	if d.HasErrors() || f == nil {
		return false
	}
	attrs, d := f.Body.JustAttributes()
	l.addDiags(d)
	for _, a := range sortedAttrs(attrs) {
		v, ok := l.vars[a.Name]
		if !ok {
			names := make([]string, 0, len(l.vars))
			for n := range l.vars {
				names = append(names, n)
			}
			l.warnf(a.NameRange.Ptr(), "Value for undeclared variable",
				"The file %s assigns variable %q, which is not declared, so the value is ignored.%s", filepath.Base(filename), a.Name, didYouMean(a.Name, names))
			continue
		}
		if v.failed {
			continue
		}
		var val cty.Value
		if isJSON {
			// As in Terraform's .tfvars.json, strings are taken as they
			// are: no "${...}" is evaluated.
			var d hcl.Diagnostics
			val, d = a.Expr.Value(nil)
			l.addDiags(d)
			ok = !d.HasErrors()
			if ok {
				if le := checkValue(l.budget, val, plainCost); le != nil {
					l.addDiags(hcl.Diagnostics{valueDiag(le, a.Expr.Range())})
					ok = false
				}
			}
		} else {
			val, ok = l.literal(a.Expr)
		}
		if !ok {
			continue
		}
		if val, ok = l.convertVar(v, val, a.Expr.Range(), "the value"); ok {
			set[v.name] = val
		}
	}
	return true
}

// parseJSONVars parses a *.wfvars.json file: one JSON object of variable
// values. Its size and nesting are checked first (the JSON parser
// recurses per level).
func parseJSONVars(src []byte, filename string) (*hcl.File, hcl.Diagnostics) {
	if err := checkJSONShape(string(src), MaxValueBytes); err != nil {
		return nil, hcl.Diagnostics{{
			Severity: hcl.DiagError,
			Summary:  "Invalid variable file",
			Detail:   fmt.Sprintf("%s: %v.", filename, err),
			Subject:  &hcl.Range{Filename: filename, Start: hcl.InitialPos, End: hcl.InitialPos},
		}}
	}
	if t := bytes.TrimSpace(src); len(t) == 0 || t[0] != '{' {
		return nil, hcl.Diagnostics{{
			Severity: hcl.DiagError,
			Summary:  "Invalid variable file",
			Detail:   fmt.Sprintf("%s must hold one JSON object of variable values, like {\"order_id\": \"1001\"}.", filename),
			Subject:  &hcl.Range{Filename: filename, Start: hcl.InitialPos, End: hcl.InitialPos},
		}}
	}
	f, d := hcljson.Parse(src, filename)
	if d.HasErrors() {
		// The JSON parser reports one mistake at every enclosing level
		// (an unclosed object, then its parent, then "Root value must be
		// object"): the first is the one to fix.
		for _, e := range d {
			if e.Severity == hcl.DiagError {
				return nil, hcl.Diagnostics{e}
			}
		}
	}
	return f, d
}

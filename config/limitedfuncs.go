package config

import (
	"math"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"
	"github.com/zclconf/go-cty/cty/function"
)

// limits are the bounds of one kind of evaluation: loading a configuration,
// or resolving an activity at run time, where upstream outputs (an http
// body of up to MaxMaxResponseBytes) are data the configuration passes on.
type limits struct {
	valueBytes  int64 // the largest value
	budgetSteps int64
	budgetBytes int64
	// cpu and cpuLimit: see budget.
	cpu      func() time.Duration
	cpuLimit time.Duration
}

var (
	loadLimits = limits{valueBytes: MaxValueBytes, budgetSteps: BudgetSteps, budgetBytes: BudgetBytes, cpu: threadCPU, cpuLimit: BudgetCPU}
	runLimits  = limits{valueBytes: 2 * MaxMaxResponseBytes, budgetSteps: 4 * BudgetSteps, budgetBytes: 8 * BudgetBytes}
)

// preCheck inspects the (known) arguments of a call before it runs, and
// charges b for the work the call will do beyond walking them (the guards
// around every argument pay for that).
type preCheck func(b *budget, args []cty.Value) error

// budgetFuncs returns the functions of an evaluation that spends b: the
// guards, and every function of base whose result size or running time an
// argument drives, checked before it runs. Layered over base in the
// evaluation context, they shadow base's plain versions.
//
// calls, when not nil, lists the functions the expressions evaluated call
// (calledFunctions): only those are wrapped, which keeps a run-time
// Resolve cheap.
func budgetFuncs(base map[string]function.Function, lim limits, b *budget, calls map[string]bool) map[string]function.Function {
	out := guardFuncsFor(b, calls)
	checks := runChecks
	if lim.cpu != nil {
		checks = loadChecks
	}
	add := func(name string) {
		if pre, ok := checks[name]; ok {
			if f, ok := base[name]; ok {
				out[name] = prechecked(f, b, pre)
			}
		}
	}
	if calls != nil {
		for name := range calls {
			add(name)
		}
		return out
	}
	for name := range checks {
		add(name)
	}
	return out
}

// The checks of load-time and run-time evaluation, built once: they hold
// no state of their own.
var (
	loadChecks = preChecks(loadLimits)
	runChecks  = preChecks(runLimits)
)

// calledFunctions returns the names of the functions exprs call, the
// guards among them.
func calledFunctions(exprs ...hcl.Expression) map[string]bool {
	names := map[string]bool{}
	for _, e := range exprs {
		sx, ok := e.(hclsyntax.Expression)
		if !ok {
			continue
		}
		_ = hclsyntax.VisitAll(sx, func(n hclsyntax.Node) hcl.Diagnostics {
			if call, isCall := n.(*hclsyntax.FunctionCallExpr); isCall {
				names[call.Name] = true
			}
			return nil
		})
	}
	return names
}

// withBudget returns base with the functions of budget b layered over it.
func withBudget(base map[string]function.Function, lim limits, b *budget) map[string]function.Function {
	out := make(map[string]function.Function, len(base)+8)
	for k, v := range base {
		out[k] = v
	}
	for k, v := range budgetFuncs(base, lim, b, nil) {
		out[k] = v
	}
	return out
}

// prechecked wraps f so that pre sees its arguments first, as they were
// given: cty converts arguments to the parameter types (a tuple to a list,
// in time quadratic in its length) and works out the result type before a
// function's implementation runs, so the check runs where the result type
// is asked for, and the wrapper's parameters take any value, leaving
// conversion and validation to f. Calls with unknown arguments are not
// checked: they return an unknown result without doing the work.
func prechecked(f function.Function, b *budget, pre preCheck) function.Function {
	open := func(p function.Parameter) function.Parameter {
		p.Type = cty.DynamicPseudoType
		p.AllowNull, p.AllowUnknown, p.AllowDynamicType, p.AllowMarked = true, true, true, true
		return p
	}
	params := f.Params()
	for i := range params {
		params[i] = open(params[i])
	}
	var varParam *function.Parameter
	if vp := f.VarParam(); vp != nil {
		p := open(*vp)
		varParam = &p
	}
	return function.New(&function.Spec{
		Description: f.Description(),
		Params:      params,
		VarParam:    varParam,
		Type: func(args []cty.Value) (cty.Type, error) {
			known := true
			for _, a := range args {
				known = known && a.IsWhollyKnown() && !a.IsNull()
			}
			if known {
				unmarked := make([]cty.Value, len(args))
				for i, a := range args {
					unmarked[i], _ = a.UnmarkDeep()
				}
				if err := pre(b, unmarked); err != nil {
					return cty.NilType, err
				}
			}
			// cty checks the types of arguments already converted.
			converted, err := convertArgs(f, args)
			if err != nil {
				return cty.NilType, err
			}
			return f.ReturnTypeForValues(converted)
		},
		Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
			// As HCL would have before calling f.
			converted, err := convertArgs(f, args)
			if err != nil {
				return cty.NilVal, err
			}
			return f.Call(converted)
		},
	})
}

// convertArgs converts args to f's parameter types, as HCL does before it
// calls a function (cty's Call only checks that they conform).
func convertArgs(f function.Function, args []cty.Value) ([]cty.Value, error) {
	params, varParam := f.Params(), f.VarParam()
	out := make([]cty.Value, len(args))
	for i, a := range args {
		var p function.Parameter
		switch {
		case i < len(params):
			p = params[i]
		case varParam != nil:
			p = *varParam
		default:
			return args, nil // f.Call reports the count
		}
		out[i] = a
		if a.Type() == cty.DynamicPseudoType || p.Type == cty.DynamicPseudoType {
			continue
		}
		v, err := convert.Convert(a, p.Type)
		if err != nil {
			return nil, function.NewArgError(i, err)
		}
		out[i] = v
	}
	return out, nil
}

// stringBytes sums the lengths of the string arguments.
func stringBytes(args []cty.Value) int64 {
	var n int64
	for _, a := range args {
		if a.Type() == cty.String {
			n += int64(len(a.AsString()))
		}
	}
	return n
}

// tupleSquares sums n*n over the tuple arguments: cty converts a tuple to
// a list or set in time quadratic in its length.
func tupleSquares(args []cty.Value) int64 {
	var n int64
	for _, a := range args {
		if a.Type().IsTupleType() {
			l := int64(a.LengthInt())
			n += l * l
		}
	}
	return n
}

// preChecks are the checks of the functions whose result size or running
// time an argument drives. Every other function's result is at most about
// as large as its arguments, which the guards have already checked, and
// takes time linear (or n log n) in them.
func preChecks(lim limits) map[string]preCheck {
	limit := lim.valueBytes
	tooLarge := func(fn string, est float64) error {
		if est <= float64(limit) {
			return nil
		}
		return limitf("Result too large", "the result of %s would be about %s, more than the %d MiB wf allows for one value", fn, humanBytes(est), limit>>20)
	}
	sumSizes := func(args []cty.Value) float64 {
		var sum float64
		for _, a := range args {
			sum += float64(sizeOf(a, limit))
		}
		return sum
	}
	spend := func(b *budget, steps int64) error {
		if err := b.spendSteps(steps); err != nil {
			return err
		}
		return nil
	}
	// graphemes: functions that walk strings grapheme by grapheme.
	graphemes := func(b *budget, args []cty.Value) error { return spend(b, stringBytes(args)/slowStrings) }
	// quadratic: functions that convert tuple arguments to lists or sets.
	quadratic := func(b *budget, args []cty.Value) error { return spend(b, squareSteps*tupleSquares(args)) }
	// conversion: tolist and toset, linear for a tuple of one element
	// type (linearTo), quadratic otherwise.
	conversion := func(b *budget, args []cty.Value) error {
		if len(args) == 1 && uniformTuple(args[0]) {
			return spend(b, int64(args[0].LengthInt()))
		}
		return quadratic(b, args)
	}
	combining := func(fn string, square bool) preCheck {
		return func(b *budget, args []cty.Value) error {
			if square {
				if err := quadratic(b, args); err != nil {
					return err
				}
			}
			return tooLarge(fn, sumSizes(args))
		}
	}
	regexWork := func(b *budget, pattern, s string) error {
		return spend(b, int64(len(s))+int64(len(pattern))*int64(len(s))/regexStepsDiv)
	}
	return map[string]preCheck{
		"format": func(b *budget, args []cty.Value) error {
			extra, err := formatWidths(args[0].AsString())
			if err != nil {
				return err
			}
			if err := spend(b, int64(extra)+stringBytes(args)); err != nil {
				return err
			}
			return tooLarge("format", float64(len(args[0].AsString()))+extra+sumSizes(args[1:]))
		},
		"formatlist": func(b *budget, args []cty.Value) error {
			extra, err := formatWidths(args[0].AsString())
			if err != nil {
				return err
			}
			n, scalars, lists := 1.0, 0.0, 0.0
			for _, a := range args[1:] {
				if a.Type().IsListType() || a.Type().IsTupleType() || a.Type().IsSetType() {
					n = max(n, float64(a.LengthInt()))
					lists += float64(sizeOf(a, limit))
				} else {
					scalars += float64(sizeOf(a, limit))
				}
			}
			est := n*(float64(len(args[0].AsString()))+extra+scalars+elementCost) + lists
			if err := tooLarge("formatlist", est); err != nil {
				return err
			}
			return spend(b, int64(est)+squareSteps*tupleSquares(args))
		},
		"indent": func(b *budget, args []cty.Value) error {
			n, _ := args[0].AsBigFloat().Float64()
			s := args[1].AsString()
			return tooLarge("indent", float64(len(s))+math.Max(n, 0)*float64(strings.Count(s, "\n")))
		},
		"join": func(b *budget, args []cty.Value) error {
			count := 0.0
			for _, l := range args[1:] {
				count += float64(l.LengthInt())
			}
			return tooLarge("join", sumSizes(args[1:])+count*float64(len(args[0].AsString())))
		},
		"replace": func(b *budget, args []cty.Value) error {
			s, old, repl := args[0].AsString(), args[1].AsString(), args[2].AsString()
			count := strings.Count(s, old)
			return tooLarge("replace", float64(len(s))+float64(count)*float64(len(repl)-len(old)))
		},
		"regex_replace": func(b *budget, args []cty.Value) error {
			s, pattern, repl := args[0].AsString(), args[1].AsString(), args[2].AsString()
			re, err := compileBounded("regex_replace", pattern, s)
			if err != nil || re == nil {
				return err // an invalid pattern is the function's own error
			}
			if err := regexWork(b, pattern, s); err != nil {
				return err
			}
			matches := re.FindAllStringSubmatchIndex(s, int(limit/elementCost)+1)
			if len(matches) > int(limit/elementCost) {
				return limitf("Result too large", "regex_replace: the pattern matches more than %d times", limit/elementCost)
			}
			est := float64(len(s))
			var buf []byte
			for _, m := range matches {
				buf = re.ExpandString(buf[:0], repl, s, m)
				est += float64(len(buf) - (m[1] - m[0]))
				if err := tooLarge("regex_replace", est); err != nil {
					return err
				}
			}
			return spend(b, int64(len(matches))*producedSteps)
		},
		"regex": func(b *budget, args []cty.Value) error {
			if _, err := compileBounded("regex", args[0].AsString(), args[1].AsString()); err != nil {
				return err
			}
			return regexWork(b, args[0].AsString(), args[1].AsString())
		},
		"regexall": func(b *budget, args []cty.Value) error {
			re, err := compileBounded("regexall", args[0].AsString(), args[1].AsString())
			if err != nil || re == nil {
				return err
			}
			// Counting the matches first doubles the work, so it is paid
			// twice.
			if err := regexWork(b, args[0].AsString(), args[1].AsString()); err != nil {
				return err
			}
			if err := regexWork(b, args[0].AsString(), args[1].AsString()); err != nil {
				return err
			}
			if n := len(re.FindAllStringIndex(args[1].AsString(), int(limit/elementCost)+1)); n > int(limit/elementCost) {
				return limitf("Result too large", "regexall: the pattern matches more than %d times", limit/elementCost)
			}
			return nil
		},
		"split": func(b *budget, args []cty.Value) error {
			sep, s := args[0].AsString(), args[1].AsString()
			n := strings.Count(s, sep) + 1
			if sep == "" {
				n = utf8.RuneCountInString(s)
			}
			return tooLarge("split", float64(len(s))+float64(n)*elementCost)
		},
		"setproduct": func(b *budget, args []cty.Value) error {
			count, width := 1.0, 0.0
			for _, a := range args {
				n := float64(a.LengthInt())
				count *= n
				if n > 0 {
					width += float64(sizeOf(a, limit))/n + elementCost
				}
			}
			if err := tooLarge("setproduct", count*width); err != nil {
				return err
			}
			return spend(b, int64(count)*int64(len(args))*producedSteps+squareSteps*tupleSquares(args))
		},
		"chunklist": func(b *budget, args []cty.Value) error {
			if err := quadratic(b, args); err != nil {
				return err
			}
			size, _ := args[1].AsBigFloat().Float64()
			n := float64(args[0].LengthInt())
			chunks := n
			if size > 0 {
				chunks = math.Ceil(n / size)
			}
			// Each chunk is a list cty builds and checks element by element.
			if err := spend(b, int64(chunks)*chunkSteps); err != nil {
				return err
			}
			return tooLarge("chunklist", float64(sizeOf(args[0], limit))+chunks*elementCost)
		},
		"concat":          combining("concat", true),
		"merge":           combining("merge", false),
		"setunion":        combining("setunion", true),
		"zipmap":          combining("zipmap", true),
		"coalescelist":    combining("coalescelist", true),
		"setintersection": combining("setintersection", true),
		"setsubtract":     combining("setsubtract", true),
		"tolist":          conversion,
		"toset":           conversion,
		"compact":         quadratic,
		"contains":        quadratic,
		"distinct":        quadratic,
		"flatten":         quadratic,
		"sort":            quadratic,
		"strlen":          graphemes,
		"substr":          graphemes,
		"strrev":          graphemes,
		"title":           graphemes,
		"length":          graphemes,
		"jsonencode": func(b *budget, args []cty.Value) error {
			// Escapes can make a string up to six times longer.
			return tooLarge("jsonencode", float64(sizeOf(args[0], limit))*1.2)
		},
		"jsondecode": func(b *budget, args []cty.Value) error {
			if err := checkJSONShape(args[0].AsString(), limit); err != nil {
				return err
			}
			// Every element decoded is a value built.
			return spend(b, int64(len(args[0].AsString()))/4)
		},
		"csvdecode": func(b *budget, args []cty.Value) error {
			s := args[0].AsString()
			rows := strings.Count(s, "\n") + 1
			cols := 1
			if i := strings.IndexByte(s, '\n'); i >= 0 {
				cols = strings.Count(s[:i], ",") + 1
			}
			cells := int64(rows) * int64(cols)
			if err := tooLarge("csvdecode", float64(len(s))+float64(cells)*elementCost); err != nil {
				return err
			}
			// The rows become a tuple of objects that cty converts to a
			// list.
			return spend(b, cells*producedSteps+squareSteps*int64(rows)*int64(rows))
		},
		"tonumber": func(b *budget, args []cty.Value) error {
			if args[0].Type() == cty.String && len(args[0].AsString()) > MaxNumberString {
				return limitf("Number too long", "tonumber: the string is %d characters long; wf reads numbers of up to %d", len(args[0].AsString()), MaxNumberString)
			}
			return nil
		},
		"parseint": func(b *budget, args []cty.Value) error {
			if args[0].Type() == cty.String && len(args[0].AsString()) > MaxNumberString {
				return limitf("Number too long", "parseint: the string is %d characters long; wf reads numbers of up to %d", len(args[0].AsString()), MaxNumberString)
			}
			return nil
		},
	}
}

// ctxFunc makes the evaluation context of one evaluation from its
// variables.
type ctxFunc func(vars map[string]cty.Value) *hcl.EvalContext

// withBudgetLayer returns the ctxFunc of a run-time evaluation spending b:
// base in a parent context, the functions bound to b in a child over it,
// so that only the few guarded functions are built per evaluation.
func withBudgetLayer(base map[string]function.Function, b *budget, calls map[string]bool) ctxFunc {
	return func(vars map[string]cty.Value) *hcl.EvalContext {
		parent := &hcl.EvalContext{Variables: vars, Functions: base}
		child := parent.NewChild()
		child.Functions = budgetFuncs(base, runLimits, b, calls)
		return child
	}
}

// ctxWith is the ctxFunc of load-time evaluation.
func (l *loader) ctxWith(vars map[string]cty.Value) *hcl.EvalContext {
	return &hcl.EvalContext{Variables: vars, Functions: l.funcs}
}

package config

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
)

// Input limits (SPEC §4.3): no configuration file under 1 MiB may make
// validate or plan crash, hang, take more than 5 s or use more than 512 MB.
// The language reference lists them (docs/language.md, "Limits").
const (
	// MaxNesting bounds brackets, braces, parentheses, template
	// interpolations and template directives inside one another. HCL's
	// parser recurses per level (80,000 levels overflowed a 1 GB stack).
	MaxNesting = 100
	// MaxExprDepth bounds how deep one expression's syntax tree may be,
	// counting operator chains (a + b + c ... is as deep as it is long to
	// evaluate) and nesting together.
	MaxExprDepth = 1000
	// MaxTokens bounds the tokens of one file: parsing costs a few hundred
	// bytes of memory a token, whatever the token. A typical 1 MiB file
	// has about 250,000.
	MaxTokens = 400_000
	// MaxNumberLiteral bounds the length of a number as written.
	MaxNumberLiteral = 256
	// MaxNumberExp10 bounds every number's magnitude: zero, or between
	// 1e-1000 and 1e1000 in absolute value (infinities are allowed).
	// Printing 1e9999999 in decimal takes minutes.
	MaxNumberExp10 = 1000
	// MaxValueBytes bounds one value: a string's length, or the size a
	// collection would have written out as JSON (counting each element as
	// at least elementCost bytes, about what it costs in memory).
	MaxValueBytes = 16 << 20
	// MaxValueDepth bounds how deeply values nest (lists of lists ...).
	MaxValueDepth = 100
	// MaxFormatWidth bounds the width and precision of a format verb.
	MaxFormatWidth = 10000
	// MaxRegexWork bounds len(pattern) x len(string) of a regular
	// expression match (Go's matcher is linear in each, so this bounds its
	// running time) and MaxRegexPattern the pattern itself.
	MaxRegexWork    = 100_000_000
	MaxRegexPattern = 64 << 10
	// MaxNumberString bounds the text tonumber and parseint read.
	MaxNumberString = 4096
)

// Evaluation budgets. Everything evaluated when a configuration is loaded
// shares one budget; each Resolve of an activity and each retry_if call gets
// its own. A budget bounds steps (loop iterations, function calls and
// nodes of values walked) and bytes (the size of the values functions,
// for expressions and templates produce), so that no configuration can
// make evaluation hang or exhaust memory however its parts combine.
const (
	BudgetSteps = 8_000_000
	BudgetBytes = 64 << 20
	// BudgetCPU bounds the CPU time of loading a configuration's
	// evaluation: a backstop against a hang, should the step costs
	// misjudge some work. The steps, not this, keep hostile files within
	// 5 s (TestHostileConfigurations); it is this high so that the same
	// configuration loads the same way on a slow machine or under the race
	// detector. It counts the loading thread's CPU only (cputime_linux.go),
	// and a Deterministic load (the Temporal interpreter's) has none.
	BudgetCPU = 10 * time.Second
	// iterationSteps is what one for-expression iteration costs: creating
	// its scope and evaluating its body is dearer than walking one node of
	// a value.
	iterationSteps = 64
	// elementCost is the least an element of a collection counts for, in
	// bytes: a cty value costs about that much memory whatever it holds.
	elementCost = 48
)

// log2of10 converts decimal exponents to binary ones.
const log2of10 = 3.3219280948873623

// numberRangeText is in every number range error.
const numberRangeText = "outside the range wf allows"

// maxExp2 is the binary exponent of 1e1000.
var maxExp2 = int(math.Ceil(MaxNumberExp10 * log2of10))

// limitError is a limit that evaluation hit. Its Summary becomes the
// diagnostic's summary wherever the error surfaces (function call,
// operator or wf's own guards).
type limitError struct {
	Summary string
	Detail  string
}

func (e *limitError) Error() string { return e.Detail }

func limitf(summary, format string, args ...any) *limitError {
	return &limitError{Summary: summary, Detail: fmt.Sprintf(format, args...)}
}

// budget is what one evaluation may still spend. It is not safe for
// concurrent use: every evaluation that runs concurrently has its own.
type budget struct {
	// cpu, when set, is the loading thread's CPU time, and cpuLimit what the
	// evaluation may use of it from cpuStart: a backstop for work the step
	// costs misjudge (load only; see limits).
	cpu                func() time.Duration
	cpuStart, cpuLimit time.Duration
	spends             int
	// reported is set once the exhaustion has been reported, so that the
	// thousands of evaluations that fail after it stay quiet.
	reported     bool
	steps, bytes int64
	// valueBytes is the largest value this evaluation may hold, and
	// totalBytes what bytes started at.
	valueBytes, totalBytes int64
	// err is the first exhaustion; it sticks, so that try() or can()
	// swallowing the error does not let the evaluation go on for free.
	err *limitError
}

func newBudget(lim limits) *budget {
	b := &budget{steps: lim.budgetSteps, bytes: lim.budgetBytes, valueBytes: lim.valueBytes, totalBytes: lim.budgetBytes}
	if lim.cpuLimit > 0 && lim.cpu != nil {
		b.cpu, b.cpuLimit, b.cpuStart = lim.cpu, lim.cpuLimit, lim.cpu()
	}
	return b
}

func (b *budget) spendSteps(n int64) *limitError {
	if b.err != nil {
		return b.err
	}
	if b.cpu != nil {
		if b.spends++; b.spends%256 == 0 && b.cpu()-b.cpuStart > b.cpuLimit {
			b.err = limitf("Configuration too expensive to evaluate",
				"evaluating the configuration took more than %s of CPU time", b.cpuLimit)
			return b.err
		}
	}
	b.steps -= n
	if b.steps < 0 {
		b.err = limitf("Configuration too expensive to evaluate",
			"evaluating this takes more steps than wf allows (loop iterations, function calls and values walked): a for expression over a large collection, nested loops or repeated calls on large values multiply quickly")
	}
	return b.err
}

func (b *budget) spendBytes(n int64) *limitError {
	if b.err != nil {
		return b.err
	}
	b.bytes -= n
	if b.bytes < 0 {
		b.err = limitf("Configuration too expensive to evaluate",
			"evaluating this produces more values than wf allows (function results, for expressions and templates together, at most %d MiB)", b.totalBytes>>20)
	}
	return b.err
}

// checkNumber reports a number outside ±1e1000 (or a non-zero one closer
// to zero than 1e-1000).
func checkNumber(bf *big.Float) *limitError {
	if bf.IsInf() || bf.Sign() == 0 {
		return nil
	}
	if exp := bf.MantExp(nil); exp > maxExp2 || exp < -maxExp2 {
		return limitf("Number out of range",
			"a number of about 1e%d is %s (zero, or between 1e-%d and 1e%d in absolute value)", int(math.Round(float64(exp)/log2of10)), numberRangeText, MaxNumberExp10, MaxNumberExp10)
	}
	return nil
}

// cost says what walking a value for a given use costs, beyond one step a
// node: the functions that convert a tuple to a list or set (tolist,
// distinct, concat, a conditional's type unification, ...) take time
// quadratic in its length inside cty, and a few string functions walk
// strings grapheme by grapheme, about 60 ns a byte.
type cost struct {
	// tupleSquare charges squareSteps for every n-element tuple.
	tupleSquare bool
	// stringDiv charges one step per stringDiv bytes of every string.
	stringDiv int64
	// produced charges producedSteps for every node, for values just
	// built rather than passed along.
	produced bool
}

const (
	squareSteps   = 2 // per n*n of a converted tuple
	producedSteps = 8 // per node built
	cheapStrings  = 64
	numberSteps   = 16 // per number walked
	slowStrings   = 1
)

var plainCost = cost{stringDiv: cheapStrings}

// valueCost walks v and returns its size (see MaxValueBytes) and the steps
// the walk and the use it is for cost (see cost). It stops as soon as the
// size passes limit, or the steps pass steps, so it costs at most that
// much whatever the value shares internally (a list of a list of ... the
// same local value can be exponentially larger than its memory). Numbers
// out of range and values nested deeper than MaxValueDepth are errors.
func valueCost(v cty.Value, c cost, limit, steps int64) (size, spent int64, err *limitError) {
	if limit <= 0 {
		limit = MaxValueBytes
	}
	if c.stringDiv <= 0 {
		c.stringDiv = cheapStrings
	}
	w := &costWalk{cost: c, limit: limit, steps: steps}
	w.walk(v, 0)
	return w.size, w.spent, w.err
}

type costWalk struct {
	cost
	size, spent  int64
	limit, steps int64
	err          *limitError
}

func (w *costWalk) add(n int64) bool {
	w.size += n
	if w.size > w.limit {
		w.err = limitf("Value too large",
			"this value is larger than the %d MiB wf allows for one value (strings by length, collections by their size as JSON, at least %d bytes an element)", w.limit>>20, elementCost)
		return false
	}
	return true
}

func (w *costWalk) spend(n int64) bool {
	w.spent += n
	if w.spent > w.steps {
		w.err = limitf("Configuration too expensive to evaluate",
			"this value is too large to examine within the steps wf allows for one evaluation")
		return false
	}
	return true
}

func (w *costWalk) walk(v cty.Value, depth int) bool {
	if w.err != nil {
		return false
	}
	step := int64(1)
	if w.produced {
		step += producedSteps
	}
	if !w.spend(step) {
		return false
	}
	if depth > MaxValueDepth {
		w.err = limitf("Value nested too deeply", "this value nests more than %d levels deep (lists in lists, objects in objects, ...)", MaxValueDepth)
		return false
	}
	if !v.IsKnown() || v.IsNull() {
		return w.add(4)
	}
	v, _ = v.Unmark()
	ty := v.Type()
	switch {
	case ty == cty.String:
		n := int64(len(v.AsString()))
		return w.spend(n/w.stringDiv) && w.add(n+2)
	case ty == cty.Number:
		if err := checkNumber(v.AsBigFloat()); err != nil {
			w.err = err
			return false
		}
		// A number is usually about to be printed, and cty prints its
		// 512-bit numbers slowly.
		return w.spend(numberSteps) && w.add(8)
	case ty == cty.Bool:
		return w.add(4)
	case ty.IsListType() || ty.IsTupleType():
		if ty.IsTupleType() && w.tupleSquare {
			n := int64(v.LengthInt())
			if n > 0 && (n > w.steps/n/squareSteps || !w.spend(squareSteps*n*n)) {
				w.spend(w.steps + 1)
				return false
			}
		}
		if !w.add(2) {
			return false
		}
		// AsValueSlice, not ElementIterator: the iterator makes a number
		// value for every index, which tripled the cost of the walk.
		for _, e := range v.AsValueSlice() {
			if !w.add(elementCost) || !w.walk(e, depth+1) {
				return false
			}
		}
		return true
	case ty.IsObjectType():
		if !w.add(2) {
			return false
		}
		for name := range ty.AttributeTypes() {
			if !w.add(elementCost+int64(len(name))) || !w.walk(v.GetAttr(name), depth+1) {
				return false
			}
		}
		return true
	case ty.IsSetType():
		if !w.add(2) {
			return false
		}
		for it := v.ElementIterator(); it.Next(); {
			_, e := it.Element()
			if !w.add(elementCost) || !w.walk(e, depth+1) {
				return false
			}
		}
		return true
	case ty.IsMapType():
		if !w.add(2) {
			return false
		}
		for it := v.ElementIterator(); it.Next(); {
			k, e := it.Element()
			if !w.add(elementCost+int64(len(k.AsString()))) || !w.walk(e, depth+1) {
				return false
			}
		}
		return true
	}
	// Capsules (try's expressions) and other opaque values.
	return w.add(8)
}

// checkValue checks a value an evaluation is about to use as c says, or
// has just produced (c.produced), against the limits, and charges the
// walk, the use and, when produced, its size to b.
func checkValue(b *budget, v cty.Value, c cost) *limitError {
	if b.err != nil {
		return b.err
	}
	size, spent, err := valueCost(v, c, b.valueBytes, max(b.steps, 0)+1)
	if e := b.spendSteps(spent); e != nil {
		return e
	}
	if err != nil {
		return err
	}
	if c.produced {
		return b.spendBytes(size)
	}
	return nil
}

// valueDiag turns a limit error about the value of expr into a diagnostic.
func valueDiag(err *limitError, rng hcl.Range) *hcl.Diagnostic {
	return &hcl.Diagnostic{Severity: hcl.DiagError, Summary: err.Summary, Detail: capitalize(err.Detail) + ".", Subject: rng.Ptr()}
}

// rewriteLimitDiags gives diagnostics caused by a limit the limit's own
// words instead of HCL's generic "Error in function call" or "Operation
// failed", keeps one diagnostic of the budget's exhaustion (every
// evaluation after it fails too, each with a diagnostic of its own) and
// adds it when try() or can() swallowed it.
func rewriteLimitDiags(diags hcl.Diagnostics, b *budget, rng hcl.Range) hcl.Diagnostics {
	out := diags[:0:0]
	for _, d := range diags {
		var le *limitError
		if extra, ok := d.Extra.(hclsyntax.FunctionCallDiagExtra); ok && errors.As(extra.FunctionCallError(), &le) {
			if b != nil && le == b.err {
				if b.reported {
					continue
				}
				b.reported = true
			}
			d.Summary, d.Detail = le.Summary, capitalize(le.Detail)+"."
			if name := extra.CalledFunctionName(); !isGuard(name) {
				d.Detail = fmt.Sprintf("In a call to %s: %s.", name, le.Detail)
			} else if d.Expression != nil {
				// A guard has no name in the source: point at what it
				// guards.
				d.Subject = d.Expression.Range().Ptr()
			}
		} else if d.Summary == "Operation failed" && strings.Contains(d.Detail, numberRangeText) {
			// Only the number guard of operators fails with this text.
			d.Summary = "Number out of range"
			d.Detail = capitalize(strings.TrimPrefix(d.Detail, "Error during operation: "))
		}
		out = append(out, d)
	}
	if b != nil && b.err != nil && !b.reported {
		b.reported = true
		out = append(out, valueDiag(b.err, rng))
	}
	return out
}

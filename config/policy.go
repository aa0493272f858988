package config

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/function"

	"github.com/wf-engine/wf/retry"
)

// Defaults of a retry policy, as documented in the language reference.
const (
	DefaultInitialInterval = time.Second
	DefaultCoefficient     = 2.0
	// DefaultMaxIntervalFactor: maximum_interval defaults to this many
	// initial intervals.
	DefaultMaxIntervalFactor = 100
	// DefaultMaximumRetryAfter caps a delay the activity asks for.
	DefaultMaximumRetryAfter = retry.DefaultMaximumRetryAfter
)

var budgetSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "max_retries", Required: true},
		{Name: "window", Required: true},
		{Name: "on_exhausted"},
		{Name: "parent"},
	},
}

var policyAttrs = []hcl.AttributeSchema{
	{Name: "backoff"},
	{Name: "initial_interval"},
	{Name: "backoff_coefficient"},
	{Name: "maximum_interval"},
	{Name: "maximum_attempts"},
	{Name: "expiration"},
	{Name: "jitter"},
	{Name: "non_retryable_errors"},
	{Name: "retryable_errors"},
	{Name: "retry_if"},
	{Name: "honor_retry_after"},
	{Name: "maximum_retry_after"},
	{Name: "budget"},
	{Name: "circuit_breaker"},
	{Name: "on_open"},
}

var policySchema = &hcl.BodySchema{Attributes: policyAttrs}

// retryBlockSchema is a policy plus the two attributes only a rule has.
var retryBlockSchema = &hcl.BodySchema{
	Attributes: append(append([]hcl.AttributeSchema{}, policyAttrs...),
		hcl.AttributeSchema{Name: "on"},
		hcl.AttributeSchema{Name: "policy"},
	),
}

var policyScope = scope{where: "a retry policy"}

// retryIfRoots are the names retry_if may use besides var and local.
var retryIfRoots = map[string]bool{"error": true, "attempt": true, "elapsed": true}

// errorObjectType is the type of `error` inside retry_if.
var errorObjectType = cty.Object(map[string]cty.Type{"type": cty.String, "message": cty.String})

// spec is a partially specified policy: nil fields were not set, so a
// retry block can layer its own attributes over a named base policy.
type spec struct {
	backoff      *retry.Backoff
	initial      *time.Duration
	coefficient  *float64
	maxInterval  *time.Duration
	maxAttempts  *int
	expiration   *time.Duration
	jitter       *retry.Jitter
	nonRetryable *[]string
	retryable    *[]string
	retryIf      hcl.Expression
	honor        *bool
	maxRetryAft  *time.Duration
	budget       *string
	breaker      *string
	onOpen       *string
	// ranges holds the range of every attribute that was set.
	ranges map[string]hcl.Range
}

// over returns s with every field set in top replacing s's.
func (s spec) over(top spec) spec {
	out := s
	out.ranges = make(map[string]hcl.Range, len(s.ranges)+len(top.ranges))
	for k, v := range s.ranges {
		out.ranges[k] = v
	}
	for k, v := range top.ranges {
		out.ranges[k] = v
	}
	if top.backoff != nil {
		out.backoff = top.backoff
	}
	if top.initial != nil {
		out.initial = top.initial
	}
	if top.coefficient != nil {
		out.coefficient = top.coefficient
	}
	if top.maxInterval != nil {
		out.maxInterval = top.maxInterval
	}
	if top.maxAttempts != nil {
		out.maxAttempts = top.maxAttempts
	}
	if top.expiration != nil {
		out.expiration = top.expiration
	}
	if top.jitter != nil {
		out.jitter = top.jitter
	}
	if top.nonRetryable != nil {
		out.nonRetryable = top.nonRetryable
	}
	if top.retryable != nil {
		out.retryable = top.retryable
	}
	if top.retryIf != nil {
		out.retryIf = top.retryIf
	}
	if top.honor != nil {
		out.honor = top.honor
	}
	if top.maxRetryAft != nil {
		out.maxRetryAft = top.maxRetryAft
	}
	if top.budget != nil {
		out.budget = top.budget
	}
	if top.breaker != nil {
		out.breaker = top.breaker
	}
	if top.onOpen != nil {
		out.onOpen = top.onOpen
	}
	return out
}

// forever reports whether the policy has neither an attempt limit nor an
// expiration.
func (s spec) forever() bool {
	return (s.maxAttempts == nil || *s.maxAttempts == 0) && (s.expiration == nil || *s.expiration == 0)
}

type namedPolicy struct {
	spec      spec
	rule      retry.Rule
	declRange hcl.Range
	// rules is rule alone, the Rules of every activity whose retry
	// attribute names the policy (made by the first): nothing changes
	// an activity's rules once loaded, and a copy each was 200 bytes.
	rules []retry.Rule
}

func (l *loader) loadBudgets(blocks []*hcl.Block) {
	l.budgets = make(map[string]*Budget)
	for _, b := range blocks {
		name := b.Labels[0]
		if prev, dup := l.budgets[name]; dup {
			l.duplicate("retry_budget", name, b.DefRange, prev.DeclRange)
			continue
		}
		content, d := b.Body.Content(budgetSchema)
		l.addDiags(d)
		if d.HasErrors() {
			continue
		}
		bud := &Budget{Budget: retry.Budget{Name: name, OnExhausted: "wait"}, DeclRange: b.DefRange}
		// Declared even when invalid, so references to it do not also fail;
		// the error already keeps the configuration from being used.
		l.budgets[name] = bud
		for _, a := range sortedAttrs(content.Attributes) {
			if a.Name == "parent" {
				l.budgetParent(bud, a)
				continue
			}
			v, vok := l.evalStatic(a.Expr, policyScope)
			if !vok || v.IsNull() {
				continue
			}
			var d *hcl.Diagnostic
			switch a.Name {
			case "max_retries":
				var n int
				if n, d = parseInt(v, a.Expr, a.Name); d == nil {
					if n < 0 {
						d = &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid max_retries",
							Detail: fmt.Sprintf("max_retries must be zero or more, got %d.", n), Subject: a.Expr.Range().Ptr()}
					}
					bud.MaxRetries = n
				}
			case "window":
				var w time.Duration
				if w, d = parseDuration(v, a.Expr, a.Name); d == nil {
					if w == 0 {
						d = &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid window",
							Detail: "window must be longer than zero: it is the sliding window retries are counted in.", Subject: a.Expr.Range().Ptr()}
					}
					bud.Window = w
				}
			case "on_exhausted":
				var s string
				if s, d = parseString(v, a.Expr, a.Name); d == nil {
					if s != "wait" && s != "fail" {
						d = &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid on_exhausted",
							Detail: fmt.Sprintf("on_exhausted must be \"wait\" or \"fail\", got %q.%s", s, didYouMean(s, []string{"wait", "fail"})), Subject: a.Expr.Range().Ptr()}
					}
					bud.OnExhausted = s
				}
			}
			if d != nil {
				l.addDiags(hcl.Diagnostics{d})
			}
		}
	}
}

func (l *loader) loadPolicies(blocks []*hcl.Block) {
	l.policies = make(map[string]*namedPolicy)
	for _, b := range blocks {
		name := b.Labels[0]
		if prev, dup := l.policies[name]; dup {
			l.duplicate("retry_policy", name, b.DefRange, prev.declRange)
			continue
		}
		np := &namedPolicy{declRange: b.DefRange}
		l.policies[name] = np
		content, d := b.Body.Content(policySchema)
		l.addDiags(d)
		if d.HasErrors() {
			continue
		}
		s, ok := l.decodeSpec(content.Attributes)
		if !ok {
			continue
		}
		np.spec = s
		np.rule, _ = l.finalize(s, s.ranges, nil)
		if s.forever() {
			l.warnf(b.DefRange.Ptr(), "Retry policy can retry forever",
				"retry_policy %q has no maximum_attempts and no expiration, so a failure that keeps happening is retried forever. Set maximum_attempts (e.g. 5) or expiration (e.g. \"10m\").", name)
		}
	}
}

// decodeSpec reads the policy attributes present in attrs.
func (l *loader) decodeSpec(attrs hcl.Attributes) (spec, bool) {
	s := spec{ranges: make(map[string]hcl.Range)}
	ok := true
	fail := func(d *hcl.Diagnostic) {
		l.addDiags(hcl.Diagnostics{d})
		ok = false
	}
	bad := func(a *hcl.Attribute, summary, format string, args ...any) {
		fail(&hcl.Diagnostic{Severity: hcl.DiagError, Summary: summary,
			Detail: fmt.Sprintf(format, args...), Subject: a.Expr.Range().Ptr()})
	}
	for _, a := range sortedAttrs(attrs) {
		switch a.Name {
		case "on", "policy":
			continue // rule-only; the caller handles them
		case "budget":
			name, found := l.staticRef(a, "retry_budget", "budget")
			if !found {
				ok = false
				continue
			}
			s.budget = &name
			s.ranges[a.Name] = a.Expr.Range()
			continue
		case "circuit_breaker", "on_open":
			ok = l.decodeGateAttr(a, &s) && ok
			continue
		case "retry_if":
			if !l.checkRetryIf(a.Expr) {
				ok = false
				continue
			}
			s.retryIf = a.Expr
			s.ranges[a.Name] = a.Expr.Range()
			continue
		}
		v, vok := l.evalStatic(a.Expr, policyScope)
		if !vok {
			ok = false
			continue
		}
		if v.IsNull() {
			continue
		}
		var d *hcl.Diagnostic
		switch a.Name {
		case "backoff":
			var str string
			if str, d = parseString(v, a.Expr, a.Name); d == nil {
				switch b := retry.Backoff(str); b {
				case retry.Exponential, retry.Linear, retry.Fixed:
					s.backoff = &b
				default:
					bad(a, "Invalid backoff", "backoff must be \"exponential\", \"linear\" or \"fixed\", got %q.%s", str,
						didYouMean(str, []string{string(retry.Exponential), string(retry.Linear), string(retry.Fixed)}))
				}
			}
		case "initial_interval", "maximum_interval", "expiration":
			var dur time.Duration
			if dur, d = parseDuration(v, a.Expr, a.Name); d == nil {
				switch a.Name {
				case "initial_interval":
					s.initial = &dur
				case "maximum_interval":
					s.maxInterval = &dur
				default:
					s.expiration = &dur
				}
			}
		case "backoff_coefficient":
			var f float64
			if f, d = parseFloat(v, a.Expr, a.Name); d == nil {
				if f < 1 || math.IsInf(f, 0) || math.IsNaN(f) {
					bad(a, "Invalid backoff_coefficient",
						"backoff_coefficient must be at least 1 (and finite), got %g: a smaller factor would shrink the wait after each failure.", f)
				} else {
					s.coefficient = &f
				}
			}
		case "maximum_attempts":
			var n int
			if n, d = parseInt(v, a.Expr, a.Name); d == nil {
				if n < 0 {
					bad(a, "Invalid maximum_attempts",
						"maximum_attempts must be zero (unlimited) or more, got %d.", n)
				} else {
					s.maxAttempts = &n
				}
			}
		case "jitter":
			var j retry.Jitter
			if j, d = parseJitter(v, a.Expr); d == nil {
				s.jitter = &j
			}
		case "non_retryable_errors", "retryable_errors":
			var list []string
			if list, d = parseStrings(v, a.Expr, a.Name); d == nil {
				if a.Name == "retryable_errors" {
					s.retryable = &list
				} else {
					s.nonRetryable = &list
				}
			}
		case "honor_retry_after":
			var b bool
			if b, d = parseBool(v, a.Expr, a.Name); d == nil {
				s.honor = &b
			}
		case "maximum_retry_after":
			var dur time.Duration
			if dur, d = parseDuration(v, a.Expr, a.Name); d == nil {
				if dur == 0 {
					bad(a, "Invalid maximum_retry_after",
						"maximum_retry_after must be longer than zero: it caps the delay an activity asks for (Retry-After). To ignore such delays, set honor_retry_after = false.")
				} else {
					s.maxRetryAft = &dur
				}
			}
		}
		if d != nil {
			fail(d)
			continue
		}
		s.ranges[a.Name] = a.Expr.Range()
	}
	return s, ok
}

func parseJitter(v cty.Value, expr hcl.Expression) (retry.Jitter, *hcl.Diagnostic) {
	rng := expr.Range()
	badJitter := func(got string, hint ...string) (retry.Jitter, *hcl.Diagnostic) {
		detail := fmt.Sprintf("jitter must be \"none\", \"full\", \"equal\", \"decorrelated\" or a number in (0,1], got %s.%s", got, strings.Join(hint, ""))
		return retry.Jitter{}, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid jitter", Detail: detail, Subject: &rng}
	}
	switch v.Type() {
	case cty.Number:
		f, _ := v.AsBigFloat().Float64()
		if !(f > 0 && f <= 1) {
			return badJitter(v.AsBigFloat().Text('g', 10))
		}
		return retry.Jitter{Mode: retry.JitterFraction, Fraction: f}, nil
	case cty.String:
		switch m := retry.JitterMode(v.AsString()); m {
		case retry.JitterNone, retry.JitterFull, retry.JitterEqual, retry.JitterDecorrelated:
			return retry.Jitter{Mode: m}, nil
		}
		return badJitter(fmt.Sprintf("%q", v.AsString()), didYouMean(v.AsString(), []string{
			string(retry.JitterNone), string(retry.JitterFull), string(retry.JitterEqual), string(retry.JitterDecorrelated)}))
	}
	return badJitter("a value of type " + v.Type().FriendlyName())
}

// staticRef decodes an attribute that must be a bare reference ROOT.NAME to
// a declared retry_policy or retry_budget and returns NAME.
func (l *loader) staticRef(a *hcl.Attribute, root, attr string) (string, bool) {
	t, d := hcl.AbsTraversalForExpr(a.Expr)
	name, named := traversalName(t)
	if d.HasErrors() || t.RootName() != root || !named || len(t) != 2 {
		l.errorf(a.Expr.Range().Ptr(), "Invalid "+attr+" reference",
			"%s must be a reference like %s.NAME.", attr, root)
		return "", false
	}
	var found bool
	if root == "retry_budget" {
		_, found = l.budgets[name]
	} else {
		_, found = l.policies[name]
	}
	if !found {
		what := map[string]string{"retry_budget": "retry budget", "retry_policy": "retry policy"}[root]
		var names []string
		if root == "retry_budget" {
			names = keysOf(l.budgets)
		} else {
			names = keysOf(l.policies)
		}
		l.errorf(t.SourceRange().Ptr(), "Reference to undeclared "+what,
			"There is no %s %q in this configuration.%s", root, name, didYouMean(name, names))
		return "", false
	}
	return name, true
}

// checkRetryIf validates a retry_if expression at load time: references,
// and the result type with unknown values of the run-time types.
func (l *loader) checkRetryIf(expr hcl.Expression) bool {
	sc := scope{where: "retry_if", extra: retryIfRoots}
	if _, ok := l.checkRefs(expr, sc); !ok {
		return false
	}
	v, d := evaluate(expr, l.retryIfCtx(l.scopedVars(expr), cty.UnknownVal(errorObjectType), cty.UnknownVal(cty.Number), cty.UnknownVal(cty.Number)), l.budget)
	l.addDiags(d)
	if d.HasErrors() {
		return false
	}
	if ty := v.Type(); ty != cty.Bool && ty != cty.DynamicPseudoType {
		l.errorf(expr.Range().Ptr(), "Invalid retry_if",
			"retry_if must be a bool expression, but this one is a %s.", ty.FriendlyName())
		return false
	}
	return true
}

func (l *loader) retryIfCtx(base map[string]cty.Value, errVal, attempt, elapsed cty.Value) *hcl.EvalContext {
	return retryIfCtx(base, l.funcs, errVal, attempt, elapsed)
}

func retryIfCtx(base map[string]cty.Value, funcs map[string]function.Function, errVal, attempt, elapsed cty.Value) *hcl.EvalContext {
	vars := make(map[string]cty.Value, len(base)+3)
	for k, v := range base {
		vars[k] = v
	}
	vars["error"] = errVal
	vars["attempt"] = attempt
	vars["elapsed"] = elapsed
	return &hcl.EvalContext{Variables: vars, Functions: funcs}
}

// compileRetryIf turns a checked retry_if expression into a Predicate. The
// closure owns copies of the static scope, so it is safe for concurrent use.
func (l *loader) compileRetryIf(expr hcl.Expression) retry.Predicate {
	base := l.staticVars()
	funcs := l.runFuncs
	calls := calledFunctions(expr)
	return func(f retry.Failure, attempt int, elapsed time.Duration) (bool, error) {
		errVal := cty.ObjectVal(map[string]cty.Value{
			"type":    cty.StringVal(f.Type),
			"message": cty.StringVal(f.Message),
		})
		b := newBudget(runLimits)
		ctx := retryIfCtx(base, funcs, errVal, cty.NumberIntVal(int64(attempt)), cty.NumberFloatVal(elapsed.Seconds()))
		v, d := evaluate(expr, withBudgetLayer(funcs, b, calls)(ctx.Variables), b)
		if d.HasErrors() {
			return false, fmt.Errorf("evaluate retry_if at %s: %s", expr.Range(), d.Error())
		}
		v, _ = v.UnmarkDeep()
		if v.Type() != cty.Bool || !v.IsKnown() || v.IsNull() {
			return false, fmt.Errorf("evaluate retry_if at %s: result must be true or false, got %s", expr.Range(), describe(v))
		}
		return v.True(), nil
	}
}

func describe(v cty.Value) string {
	switch {
	case !v.IsKnown():
		return "an unknown value"
	case v.IsNull():
		return "null"
	}
	return "a " + v.Type().FriendlyName()
}

// finalize applies defaults, checks the constraints between attributes and
// builds the rule. own holds the ranges of the attributes the block itself
// set, so a conflict is reported where the user wrote it.
func (l *loader) finalize(s spec, own map[string]hcl.Range, fallback *hcl.Range) (retry.Rule, bool) {
	p := retry.Policy{
		Backoff:           retry.Exponential,
		InitialInterval:   DefaultInitialInterval,
		Coefficient:       DefaultCoefficient,
		Jitter:            retry.Jitter{Mode: retry.JitterNone},
		HonorRetryAfter:   true,
		MaximumRetryAfter: DefaultMaximumRetryAfter,
	}
	if s.backoff != nil {
		p.Backoff = *s.backoff
	}
	if s.initial != nil {
		p.InitialInterval = *s.initial
	}
	if s.coefficient != nil {
		p.Coefficient = *s.coefficient
	}
	p.MaximumInterval = DefaultMaxIntervalFactor * p.InitialInterval
	if p.InitialInterval > math.MaxInt64/DefaultMaxIntervalFactor {
		p.MaximumInterval = math.MaxInt64
	}
	if s.maxInterval != nil {
		p.MaximumInterval = *s.maxInterval
	}
	if s.maxAttempts != nil {
		p.MaximumAttempts = *s.maxAttempts
	}
	if s.expiration != nil {
		p.Expiration = *s.expiration
	}
	if s.jitter != nil {
		p.Jitter = *s.jitter
	}
	if s.nonRetryable != nil {
		p.NonRetryable = *s.nonRetryable
	}
	if s.retryable != nil {
		p.Retryable = *s.retryable
	}
	if s.honor != nil {
		p.HonorRetryAfter = *s.honor
	}
	if s.maxRetryAft != nil {
		p.MaximumRetryAfter = *s.maxRetryAft
	}
	if s.budget != nil {
		p.Budget = *s.budget
	}
	ok := l.finalizeGates(s, own, &p)
	if p.MaximumInterval < p.InitialInterval {
		subject := fallback
		for _, k := range []string{"maximum_interval", "initial_interval"} {
			if r, set := own[k]; set {
				subject = r.Ptr()
				break
			}
		}
		if subject == nil {
			if r, set := s.ranges["maximum_interval"]; set {
				subject = r.Ptr()
			}
		}
		l.errorf(subject, "Invalid maximum_interval",
			"maximum_interval (%s) is shorter than initial_interval (%s); it caps every wait, so it must be at least initial_interval.",
			p.MaximumInterval, p.InitialInterval)
		ok = false
	}
	rule := retry.Rule{Policy: p}
	if s.retryIf != nil {
		rule.RetryIf = l.compileRetryIf(s.retryIf)
	}
	return rule, ok
}

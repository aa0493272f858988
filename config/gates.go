package config

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"

	"github.com/wf-engine/wf/retry"
)

// This file holds what an attempt must pass besides its retry policy
// (SPEC §11): circuit_breaker blocks, the circuit_breaker and on_open
// attributes of a policy, and the parent of a retry_budget.

// Defaults of a circuit_breaker block, as documented in the language
// reference.
const (
	DefaultFailureRatio  = 0.5
	DefaultMinimumCalls  = 10
	DefaultBreakerWindow = 30 * time.Second
	DefaultBreakDuration = 30 * time.Second
	DefaultHalfOpenCalls = 1
)

// Breaker is a top-level circuit_breaker block.
type Breaker struct {
	retry.Breaker
	DeclRange hcl.Range
}

var breakerSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "failure_ratio"},
		{Name: "minimum_calls"},
		{Name: "window"},
		{Name: "break_duration"},
		{Name: "half_open_calls"},
		{Name: "failures"},
	},
}

func (l *loader) loadBreakers(blocks []*hcl.Block) {
	l.breakers = make(map[string]*Breaker)
	for _, b := range blocks {
		name := b.Labels[0]
		if prev, dup := l.breakers[name]; dup {
			l.duplicate("circuit_breaker", name, b.DefRange, prev.DeclRange)
			continue
		}
		br := &Breaker{Breaker: retry.Breaker{
			Name:          name,
			FailureRatio:  DefaultFailureRatio,
			MinimumCalls:  DefaultMinimumCalls,
			Window:        DefaultBreakerWindow,
			BreakDuration: DefaultBreakDuration,
			HalfOpenCalls: DefaultHalfOpenCalls,
		}, DeclRange: b.DefRange}
		// Declared even when invalid, so references to it do not also fail.
		l.breakers[name] = br
		content, d := b.Body.Content(breakerSchema)
		l.addDiags(d)
		if d.HasErrors() {
			continue
		}
		for _, a := range sortedAttrs(content.Attributes) {
			v, ok := l.evalStatic(a.Expr, policyScope)
			if !ok || v.IsNull() {
				continue
			}
			bad := func(format string, args ...any) *hcl.Diagnostic {
				return &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid " + a.Name,
					Detail: fmt.Sprintf(format, args...), Subject: a.Expr.Range().Ptr()}
			}
			var d *hcl.Diagnostic
			switch a.Name {
			case "failure_ratio":
				var f float64
				if f, d = parseFloat(v, a.Expr, a.Name); d == nil {
					if !(f > 0 && f <= 1) || math.IsNaN(f) {
						d = bad("failure_ratio must be more than 0 and at most 1 (the share of failed calls that opens the breaker), got %g.", f)
					}
					br.FailureRatio = f
				}
			case "minimum_calls", "half_open_calls":
				var n int
				if n, d = parseInt(v, a.Expr, a.Name); d == nil {
					if n < 1 {
						d = bad("%s must be at least 1, got %d.", a.Name, n)
					}
					if a.Name == "minimum_calls" {
						br.MinimumCalls = n
					} else {
						br.HalfOpenCalls = n
					}
				}
			case "window", "break_duration":
				var dur time.Duration
				if dur, d = parseDuration(v, a.Expr, a.Name); d == nil {
					if dur <= 0 {
						d = bad("%s must be longer than zero.", a.Name)
					}
					if a.Name == "window" {
						br.Window = dur
					} else {
						br.BreakDuration = dur
					}
				}
			case "failures":
				var list []string
				if list, d = parseStrings(v, a.Expr, a.Name); d == nil {
					if slices.Contains(list, "interrupted") {
						l.warnf(a.Expr.Range().Ptr(), "Interrupted attempts never count",
							"An attempt cut short because wf stopped is never the activity's failure (SPEC §4.1), so \"interrupted\" in failures has no effect.")
					}
					br.Failures = list
				}
			}
			if d != nil {
				l.addDiags(hcl.Diagnostics{d})
			}
		}
	}
}

// decodeGateAttr decodes the circuit_breaker and on_open attributes of a
// retry policy or retry block into s.
func (l *loader) decodeGateAttr(a *hcl.Attribute, s *spec) bool {
	switch a.Name {
	case "circuit_breaker":
		name, ok := l.declaredRef(a, "circuit_breaker", "circuit breaker", sortedKeysOf(l.breakers))
		if !ok {
			return false
		}
		s.breaker = &name
	case "on_open":
		v, ok := l.evalStatic(a.Expr, policyScope)
		if !ok || v.IsNull() {
			return ok
		}
		str, d := parseString(v, a.Expr, a.Name)
		if d == nil && str != "wait" && str != "fail" {
			d = &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid on_open",
				Detail:  fmt.Sprintf("on_open must be \"wait\" (attempts wait until the breaker lets them through) or \"fail\" (the activity fails with circuit_open), got %q.", str),
				Subject: a.Expr.Range().Ptr()}
		}
		if d != nil {
			l.addDiags(hcl.Diagnostics{d})
			return false
		}
		s.onOpen = &str
	}
	s.ranges[a.Name] = a.Expr.Range()
	return true
}

// finalizeGates copies the breaker settings of s into p and checks them:
// on_open says what to do while a breaker is open, so it needs one.
func (l *loader) finalizeGates(s spec, own map[string]hcl.Range, p *retry.Policy) bool {
	if s.breaker != nil {
		p.CircuitBreaker = *s.breaker
		p.OnOpen = "wait"
	}
	if s.onOpen != nil {
		p.OnOpen = *s.onOpen
		if s.breaker == nil {
			r, ok := own["on_open"]
			if !ok {
				r = s.ranges["on_open"]
			}
			l.errorf(r.Ptr(), "on_open without a circuit breaker",
				"on_open says what an attempt does while its circuit breaker is open, but this policy has no circuit_breaker. Add circuit_breaker = circuit_breaker.NAME or remove on_open.")
			return false
		}
	}
	return true
}

// declaredRef decodes an attribute that must be a bare reference ROOT.NAME
// to one of names and returns NAME; an unknown name gets a "Did you
// mean" when one is close.
func (l *loader) declaredRef(a *hcl.Attribute, root, what string, names []string) (string, bool) {
	t, d := hcl.AbsTraversalForExpr(a.Expr)
	name, named := traversalName(t)
	if d.HasErrors() || t.RootName() != root || !named || len(t) != 2 {
		l.errorf(a.Expr.Range().Ptr(), "Invalid "+a.Name+" reference",
			"%s must be a reference like %s.NAME.", a.Name, root)
		return "", false
	}
	if !slices.Contains(names, name) {
		detail := fmt.Sprintf("There is no %s %q in this configuration.", root, name)
		if s := closestName(name, names); s != "" {
			detail += fmt.Sprintf(" Did you mean %s.%s?", root, s)
		}
		l.errorf(t.SourceRange().Ptr(), "Reference to undeclared "+what, "%s", detail)
		return "", false
	}
	return name, true
}

// budgetParent remembers the parent attribute of a retry_budget; parents
// are resolved once every budget is declared (resolveBudgetParents).
func (l *loader) budgetParent(bud *Budget, a *hcl.Attribute) {
	if l.parentAttrs == nil {
		l.parentAttrs = map[string]*hcl.Attribute{}
	}
	l.parentAttrs[bud.Name] = a
}

// resolveBudgetParents checks every parent reference and rejects cycles,
// naming every budget in the cycle.
func (l *loader) resolveBudgetParents() {
	names := sortedKeysOf(l.budgets)
	for _, name := range names {
		a := l.parentAttrs[name]
		if a == nil {
			continue
		}
		parent, ok := l.declaredRef(a, "retry_budget", "retry budget", names)
		if ok {
			l.budgets[name].Parent = parent
		}
	}
	reported := map[string]bool{}
	for _, name := range names {
		var path []string
		onPath := map[string]int{}
		for cur := name; cur != "" && !reported[cur]; cur = l.budgets[cur].Parent {
			if i, seen := onPath[cur]; seen {
				cycle := append(path[i:], cur)
				for _, n := range cycle {
					reported[n] = true
				}
				refs := make([]string, len(cycle))
				for j, n := range cycle {
					refs[j] = "retry_budget." + n
				}
				l.errorf(l.parentAttrs[cur].Expr.Range().Ptr(), "Retry budget cycle",
					"The parents of these retry budgets form a cycle: %s. A retry takes a token from its budget and every ancestor, so the chain must end.",
					strings.Join(refs, " -> "))
				break
			}
			onPath[cur] = len(path)
			path = append(path, cur)
		}
	}
}

func sortedKeysOf[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// closestName is the name within edit distance 2 (or a third of its
// length, if longer) of name, "" when none is that close.
func closestName(name string, names []string) string {
	best, bestD := "", max(2, len(name)/3)+1
	for _, n := range names {
		if d := editDistance(name, n); d < bestD {
			best, bestD = n, d
		}
	}
	return best
}

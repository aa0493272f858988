package config

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"

	"github.com/wf-engine/wf/retry"
)

var workflowSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{{Name: "key"}},
	Blocks: []hcl.BlockHeaderSchema{
		{Type: "activity", LabelNames: []string{"name"}},
		{Type: "output", LabelNames: []string{"name"}},
		{Type: "moved"},
	},
}

var activitySchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "timeout"},
		{Name: "heartbeat_timeout"},
		{Name: "retry"},
		{Name: "depends_on"},
		{Name: "task_queue"},
		{Name: "for_each"},
		{Name: "trigger_rule"},
		{Name: "when"},
	},
	Blocks: []hcl.BlockHeaderSchema{
		{Type: string(KindExec)},
		{Type: string(KindHTTP)},
		{Type: string(KindSleep)},
		{Type: "retry"},
	},
}

var kindSchemas = map[Kind]*hcl.BodySchema{
	KindExec: {Attributes: []hcl.AttributeSchema{
		{Name: "command"}, {Name: "script"}, {Name: "env"}, {Name: "dir"},
	}},
	KindHTTP: {Attributes: []hcl.AttributeSchema{
		{Name: "url", Required: true}, {Name: "method"}, {Name: "headers"}, {Name: "body"},
		{Name: "expect_status"}, {Name: "insecure_skip_verify"}, {Name: "max_response_bytes"},
	}},
	KindSleep: {Attributes: []hcl.AttributeSchema{
		{Name: "duration", Required: true},
	}},
}

// DefaultKey is the instance key of a workflow without `key`.
const DefaultKey = "default"

func (l *loader) loadWorkflows(blocks []*hcl.Block) []*Workflow {
	var out []*Workflow
	seen := map[string]hcl.Range{}
	for _, b := range blocks {
		name := b.Labels[0]
		if prev, dup := seen[name]; dup {
			l.duplicate("workflow", name, b.DefRange, prev)
			continue
		}
		seen[name] = b.DefRange
		if w := l.loadWorkflow(name, b); w != nil {
			out = append(out, w)
		}
		if l.restart {
			return nil
		}
	}
	return out
}

func (l *loader) loadWorkflow(name string, b *hcl.Block) *Workflow {
	content, d := b.Body.Content(workflowSchema)
	l.addDiags(d)
	if content == nil {
		return nil
	}
	w := &Workflow{Name: name, Key: DefaultKey, DeclRange: b.DefRange}
	if a, ok := content.Attributes["key"]; ok {
		if v, ok := l.evalStatic(a.Expr, scope{where: "a workflow key", noSensitive: true}); ok && !v.IsNull() {
			key, d := parseString(v, a.Expr, "key")
			switch {
			case d != nil:
				l.addDiags(hcl.Diagnostics{d})
			case key == "":
				l.errorf(a.Expr.Range().Ptr(), "Invalid workflow key", "The workflow key must not be empty.")
			default:
				w.Key = key
			}
		}
	}

	// Names (and kinds) first: an activity may refer to one declared after
	// it.
	// Sized for every block at once: grown one activity at a time, the
	// maps of 10,000 activities allocated twice what they hold.
	var def *deferredBody
	if body, ok := b.Body.(*hclsyntax.Body); ok && l.deferred != nil {
		def = l.deferred[body]
		delete(l.deferred, body)
	}
	n := len(content.Blocks)
	first := make(map[string]hcl.Range, n)
	if def != nil {
		n += def.count
	}
	names := make(map[string]bool, n)
	kinds := make(map[string]Kind, n)
	forEach := map[string]bool{}
	var blocks, outputs, moved []*hcl.Block
	for _, ab := range content.Blocks {
		switch ab.Type {
		case "output":
			if !validIdentifier(ab.Labels[0]) {
				l.errorf(ab.LabelRanges[0].Ptr(), "Invalid name",
					"%q is not a valid output name: a name must start with a letter or underscore and contain only letters, digits, underscores and dashes.", ab.Labels[0])
				continue
			}
			outputs = append(outputs, ab)
			continue
		case "moved":
			moved = append(moved, ab)
			continue
		}
		an := ab.Labels[0]
		if !validIdentifier(an) {
			l.errorf(ab.LabelRanges[0].Ptr(), "Invalid name",
				"%q is not a valid activity name: a name must start with a letter or underscore and contain only letters, digits, underscores and dashes.", an)
			continue
		}
		if prev, dup := first[an]; dup {
			l.duplicate("activity", an, ab.DefRange, prev)
			continue
		}
		first[an] = ab.DefRange
		names[an] = true
		kind, each := kindAndForEach(ab)
		kinds[an] = kind
		if each {
			// Only those with for_each: a lookup of any other is
			// false, and a workflow with none (len 0) skips the
			// checks of references to elements (elementOutputRefs).
			forEach[an] = true
		}
		blocks = append(blocks, ab)
	}
	def.declare(names, kinds, forEach)
	// Each activity's syntax is let go once it is loaded: an Activity
	// keeps only the expressions it evaluates later, but the workflow's
	// body, and the content read from it, would hold every activity's
	// whole tree (about 3.5 KB of blocks, bodies and maps each) until the
	// last one is loaded. Nothing reads the body after its content.
	content.Blocks = nil
	if body, ok := b.Body.(*hclsyntax.Body); ok {
		body.Blocks = nil
	}
	w.index = make(map[string]*Activity, n)
	for i, ab := range blocks {
		blocks[i] = nil
		guardActivity(ab)
		if a := l.loadActivity(w, ab, names, kinds, forEach); a != nil {
			w.Activities = append(w.Activities, a)
			w.index[a.Name] = a
		}
	}
	if def != nil && !l.loadDeferred(w, def, names, kinds, forEach) {
		return nil
	}
	l.loadOutputs(w, outputs, scope{activities: names, kinds: kinds, forEach: forEach})
	l.loadMoved(w, moved, w.index)
	return w
}

// kindAndForEach returns the kind of an activity block with exactly one
// kind block ("" otherwise: loadActivity reports that) and whether it sets
// for_each. It reads the syntax tree as PartialContent(activitySchema)
// would, without building content: it runs for every activity before any
// is loaded.
func kindAndForEach(b *hcl.Block) (kind Kind, forEach bool) {
	body, ok := b.Body.(*hclsyntax.Body)
	if !ok {
		content, _, _ := b.Body.PartialContent(activitySchema)
		if content == nil {
			return "", false
		}
		_, forEach = content.Attributes["for_each"]
		for _, cb := range content.Blocks {
			if cb.Type == "retry" {
				continue
			}
			if kind != "" {
				return "", forEach
			}
			kind = Kind(cb.Type)
		}
		return kind, forEach
	}
	_, forEach = body.Attributes["for_each"]
	for _, cb := range body.Blocks {
		switch Kind(cb.Type) {
		case KindExec, KindHTTP, KindSleep:
		default:
			continue // retry, or not in the schema
		}
		if len(cb.Labels) != 0 {
			continue // PartialContent reports and skips it
		}
		if kind != "" {
			return "", forEach
		}
		kind = Kind(cb.Type)
	}
	return kind, forEach
}

func (l *loader) loadActivity(w *Workflow, b *hcl.Block, names map[string]bool, kinds map[string]Kind, forEach map[string]bool) *Activity {
	name := b.Labels[0]
	a := &Activity{
		Name:        name,
		Block:       name,
		Workflow:    w.Name,
		DeclRange:   b.DefRange,
		TriggerRule: TriggerAllSucceeded,
	}
	content, d := bodyContent(b.Body, activitySchema)
	l.addDiags(d)
	if content == nil {
		return nil
	}
	outside := scope{where: fmt.Sprintf("activity %q outside its kind block", name)}

	var kindBlocks, retryBlocks []*hcl.Block
	for _, cb := range content.Blocks {
		if cb.Type == "retry" {
			retryBlocks = append(retryBlocks, cb)
		} else {
			kindBlocks = append(kindBlocks, cb)
		}
	}
	switch len(kindBlocks) {
	case 0:
		l.errorf(b.DefRange.Ptr(), "Missing activity kind",
			"Activity %q needs exactly one exec, http or sleep block saying what it does.", name)
	case 1:
	default:
		l.errorf(kindBlocks[1].DefRange.Ptr(), "Multiple activity kinds",
			"Activity %q has a %s block and a %s block; an activity does exactly one thing, so it takes exactly one exec, http or sleep block. Split it into two activities.",
			name, kindBlocks[0].Type, kindBlocks[1].Type)
	}

	var deps []ref
	var kr *kindResolver
	refScope := scope{where: "an activity", activities: names, kinds: kinds, forEach: forEach, self: name, each: forEach[name]}
	if attr, ok := content.Attributes["for_each"]; ok {
		deps = append(deps, l.loadForEach(a, attr, refScope)...)
	}
	if len(kindBlocks) == 1 {
		kb := kindBlocks[0]
		a.Kind = Kind(kb.Type)
		kc, d := bodyContent(kb.Body, kindSchemas[a.Kind])
		l.addDiags(d)
		if kc != nil {
			kindScope := refScope
			attrsOK := true
			sorted := sortedAttrs(kc.Attributes)
			for _, attr := range sorted {
				refs, ok := l.checkRefs(attr.Expr, kindScope)
				attrsOK = attrsOK && ok
				deps = append(deps, refs...)
				for _, r := range refs {
					a.ResolveDeps = append(a.ResolveDeps, r.name)
				}
			}
			if a.Kind == KindExec {
				_, hasCmd := kc.Attributes["command"]
				script, hasScript := kc.Attributes["script"]
				switch {
				case hasCmd && hasScript:
					l.errorf(script.NameRange.Ptr(), "Conflicting command and script",
						"An exec block takes either command (argv, no shell) or script (run by /bin/sh -c), not both.")
				case !hasCmd && !hasScript:
					l.errorf(kb.DefRange.Ptr(), "Missing command or script",
						"An exec block needs command (argv, no shell) or script (run by /bin/sh -c).")
				}
			}
			if attrsOK {
				kr = &kindResolver{
					kind:       a.Kind,
					attrs:      sorted,
					defRange:   kb.DefRange,
					resolveEnv: l.resolveEnv(w),
					calls:      l.internCalls(calledFunctions(attrExprs(kc.Attributes)...)),
					each:       forEach[name],
				}
			}
		}
	}

	if attr, ok := content.Attributes["trigger_rule"]; ok {
		l.loadTriggerRule(a, attr)
	}
	if attr, ok := content.Attributes["when"]; ok {
		deps = append(deps, l.loadWhen(a, attr, refScope)...)
	}
	if attr, ok := content.Attributes["depends_on"]; ok {
		deps = append(deps, l.dependsOn(attr, names, name)...)
	}
	// Sorted by name, the first reference to each first.
	slices.SortStableFunc(deps, func(x, y ref) int { return strings.Compare(x.name, y.name) })
	for i, r := range deps {
		if i == 0 || deps[i-1].name != r.name {
			a.DependsOn = append(a.DependsOn, r.name)
			a.DependsOnRanges = append(a.DependsOnRanges, r.rng)
		}
	}
	sort.Strings(a.ResolveDeps)
	a.ResolveDeps = slices.Compact(a.ResolveDeps)

	if attr, ok := content.Attributes["timeout"]; ok {
		if v, ok := l.evalStatic(attr.Expr, outside); ok && !v.IsNull() {
			t, d := parseDuration(v, attr.Expr, "timeout")
			if d != nil {
				l.addDiags(hcl.Diagnostics{d})
			}
			a.Timeout = t
		}
	}

	if attr, ok := content.Attributes["task_queue"]; ok {
		if v, ok := l.evalStatic(attr.Expr, outside); ok && !v.IsNull() {
			q, d := parseString(v, attr.Expr, "task_queue")
			switch {
			case d != nil:
				l.addDiags(hcl.Diagnostics{d})
			case strings.TrimSpace(q) == "":
				l.errorf(attr.Expr.Range().Ptr(), "Empty task_queue", "task_queue must name a Temporal task queue; leave it out to use the worker's default queue.")
			default:
				a.TaskQueue = q
			}
		}
	}

	l.loadHeartbeat(a, content.Attributes["heartbeat_timeout"])
	l.loadRules(a, content.Attributes["retry"], retryBlocks)

	if kr != nil {
		// Check what can be checked before the run: with upstream outputs
		// unknown, every value that does not depend on them is validated.
		res, d := kr.eval(a, nil, true, l.budget, l.ctxWith)
		l.addDiags(d)
		a.resolver = kr
		if res != nil && res.HTTP != nil {
			a.maxResponseBytes = int32(res.HTTP.MaxResponseBytes) // checked: at most 64 MiB
		}
		if res != nil && len(d) == 0 && l.budget.err == nil && constantAttrs(kr.attrs) && foldConstantBlocks {
			// Evaluating it again at run time would give the same (under
			// limits looser than the load's, which it met), so the
			// result is kept instead of what evaluates it (shared.go).
			a.resolver = (*constantResolver)(l.shared.shareResolved(res))
		}
	}
	return a
}

// dependsOn decodes depends_on = [activity.a, activity.b].
func (l *loader) dependsOn(attr *hcl.Attribute, names map[string]bool, self string) []ref {
	exprs, d := hcl.ExprList(attr.Expr)
	l.addDiags(d)
	var out []ref
	for _, e := range exprs {
		t, d := hcl.AbsTraversalForExpr(e)
		name, named := traversalName(t)
		rng := e.Range()
		switch {
		case d.HasErrors() || t.RootName() != "activity" || !named || len(t) != 2:
			l.errorf(&rng, "Invalid depends_on entry",
				"Each depends_on entry must be a reference to an activity, like activity.NAME.")
		case name == self:
			l.errorf(&rng, "Self-referential activity",
				"Activity %q cannot depend on itself.", name)
		case !names[name]:
			l.errorf(&rng, "Reference to undeclared activity",
				"There is no activity named %q in this workflow.%s", name, didYouMean(name, keysOf(names)))
		default:
			out = append(out, ref{name: name, rng: rng})
		}
	}
	return out
}

// loadRules builds the activity's ordered retry rules from either the retry
// attribute or the retry blocks.
func (l *loader) loadRules(a *Activity, attr *hcl.Attribute, blocks []*hcl.Block) {
	if attr != nil {
		if len(blocks) > 0 {
			l.errorf(attr.NameRange.Ptr(), "Conflicting retry settings",
				"Activity %q has both a retry attribute and retry blocks. Use one: `retry = retry_policy.NAME` is the same as `retry { policy = retry_policy.NAME }`.", a.Name)
			return
		}
		name, ok := l.staticRef(attr, "retry_policy", "retry")
		if !ok {
			return
		}
		p := l.policies[name]
		if p.rules == nil {
			p.rules = []retry.Rule{p.rule}
		}
		a.Rules = p.rules[:1:1] // an append makes its own
		a.RuleRanges = append(a.RuleRanges, attr.Range)
		return
	}
	for i, b := range blocks {
		content, d := b.Body.Content(retryBlockSchema)
		l.addDiags(d)
		if content == nil || d.HasErrors() {
			continue
		}
		var rule retry.Rule
		base := spec{ranges: map[string]hcl.Range{}}
		baseForever := false
		if pa, ok := content.Attributes["policy"]; ok {
			name, ok := l.staticRef(pa, "retry_policy", "policy")
			if !ok {
				continue
			}
			np := l.policies[name]
			if np.spec.ranges == nil {
				continue // the policy itself is invalid and was reported
			}
			base, baseForever = np.spec, np.spec.forever()
		}
		own, ok := l.decodeSpec(content.Attributes)
		if !ok {
			continue
		}
		merged := base.over(own)
		rule, ok = l.finalize(merged, own.ranges, b.DefRange.Ptr())
		if !ok {
			continue
		}
		if oa, ok := content.Attributes["on"]; ok {
			v, ok := l.evalStatic(oa.Expr, scope{where: "a retry block"})
			if !ok {
				continue
			}
			if !v.IsNull() {
				on, d := parseStrings(v, oa.Expr, "on")
				if d != nil {
					l.addDiags(hcl.Diagnostics{d})
					continue
				}
				if len(on) == 0 {
					l.errorf(oa.Expr.Range().Ptr(), "Empty on",
						"on must list at least one error pattern (like \"http:429\"); leave it out to match every error.")
					continue
				}
				rule.On = on
			}
		}
		if rule.On == nil && i != len(blocks)-1 {
			l.errorf(b.DefRange.Ptr(), "Retry rule without on is not last",
				"Only the last retry block of an activity may leave out `on`: a block without it matches every error, so the blocks after it could never match.")
			continue
		}
		if merged.forever() && !baseForever {
			l.warnf(b.DefRange.Ptr(), "Retry rule can retry forever",
				"This retry block of activity %q has no maximum_attempts and no expiration, so a failure that keeps happening is retried forever. Set maximum_attempts (e.g. 5) or expiration (e.g. \"10m\").", a.Name)
		}
		a.Rules = append(a.Rules, rule)
		a.RuleRanges = append(a.RuleRanges, b.DefRange)
	}
	if len(a.Rules) > 0 {
		a.Rules = l.shared.shareRules(a.Rules)
	}
}

func attrExprs(attrs hcl.Attributes) []hcl.Expression {
	out := make([]hcl.Expression, 0, len(attrs))
	for _, a := range attrs {
		out = append(out, a.Expr)
	}
	return out
}

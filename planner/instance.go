package planner

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/wf-engine/wf/config"
	"github.com/wf-engine/wf/statefile/record"
)

// instancePlanner plans one instance: the configuration's activities and
// elements against the stored records (after moved blocks), then the
// records nothing claims (removed).
type instancePlanner struct {
	wf      *config.Workflow
	now     time.Time
	replace replaceSet
	resolve resolveFunc
	// records are the stored records as the configuration names them
	// (moved blocks applied); movedFrom maps a new name to its old one.
	records   map[string]*record.Activity
	movedFrom map[string]string
	// actions holds the action of every activity and element planned so
	// far; a block with for_each gets the aggregate of its elements.
	actions map[string]Action
	// elems are the planned elements of each block with for_each whose
	// collection is known; unknown lists those that are not.
	elems   map[string][]*config.Activity
	unknown map[string]bool
	// claimed are the records an activity or element of the
	// configuration stands for.
	claimed map[string]bool
	// vals caches upstream values by name (false: kind view; true: when).
	vals map[string]cty.Value
}

func planInstance(wf *config.Workflow, st StateReader, now time.Time, replace replaceSet, resolve resolveFunc) (*InstancePlan, hcl.Diagnostics) {
	g, diags := BuildGraph(wf)
	if diags.HasErrors() {
		return nil, diags
	}
	records := map[string]*record.Activity{}
	if st != nil {
		got, err := st.Activities(wf.Name, wf.Key)
		if err != nil {
			return nil, append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Cannot read state",
				Detail:   fmt.Sprintf("read state of %s: %v", wf.Address(), err),
			})
		}
		if got != nil {
			records = got
		}
	}
	stateHash, err := hashRecords(records)
	if err != nil {
		return nil, append(diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Cannot fingerprint state",
			Detail:   fmt.Sprintf("hash state of %s: %v", wf.Address(), err),
		})
	}
	p := &instancePlanner{
		wf: wf, now: now, replace: replace, resolve: resolve,
		actions: map[string]Action{}, elems: map[string][]*config.Activity{}, unknown: map[string]bool{},
		claimed: map[string]bool{}, vals: map[string]cty.Value{},
	}
	diags = append(diags, p.applyMoves(records)...)
	// One plan per activity at least (more with for_each elements): an
	// ActivityPlan is a few hundred bytes, and a slice grown from nothing
	// to 10,000 of them was copied a dozen times.
	ip := &InstancePlan{Workflow: wf.Name, Key: wf.Key, StateHash: stateHash,
		Activities: make([]ActivityPlan, 0, len(wf.Activities))}
	for _, name := range g.Order() {
		a := wf.Activity(name)
		if a.ForEach == nil {
			ap, d := p.activity(a)
			diags = append(diags, d...)
			ip.Activities = append(ip.Activities, ap)
			continue
		}
		aps, d := p.forEach(a)
		diags = append(diags, d...)
		ip.Activities = append(ip.Activities, aps...)
	}
	ip.Activities = append(ip.Activities, p.removed()...)
	if len(ip.Activities) == 0 {
		ip.Activities = nil // as before the capacity: JSON says null
	}
	diags = append(diags, p.unmatchedReplace()...)
	return ip, diags
}

// unmatchedReplace reports -replace element addresses whose key the
// activity's for_each (known only now, from state) does not have.
func (p *instancePlanner) unmatchedReplace() hcl.Diagnostics {
	var diags hcl.Diagnostics
	prefix := replaceKey(p.wf.Name, "")
	for k := range p.replace {
		name, ok := strings.CutPrefix(k, prefix)
		if !ok {
			continue
		}
		block, key, isElem := config.SplitName(name)
		els, known := p.elems[block]
		if !isElem || !known || p.claimed[name] {
			continue
		}
		keys := make([]string, len(els))
		for i, el := range els {
			keys[i] = el.Key
		}
		detail := fmt.Sprintf("-replace=activity.%s: activity.%s has no element %q in %s.", name, block, key, p.wf.Address())
		if s := config.Suggest(key, keys); s != "" {
			detail += " Did you mean " + config.Address{Name: block, Key: s, HasKey: true}.String() + "?"
		}
		diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Replace address matches no element", Detail: detail})
	}
	return diags
}

// applyMoves renames the records the moved blocks carry over; a move onto
// a name that has state already is a warning (the old record is then
// forgotten).
func (p *instancePlanner) applyMoves(stored map[string]*record.Activity) hcl.Diagnostics {
	p.records, p.movedFrom = stored, map[string]string{}
	if len(p.wf.Moved) == 0 || len(stored) == 0 {
		return nil
	}
	names := make(map[string]bool, len(stored))
	for n := range stored {
		names[n] = true
	}
	renames, conflicts := p.wf.Renames(names)
	var diags hcl.Diagnostics
	for _, c := range conflicts {
		diags = append(diags, &hcl.Diagnostic{
			Severity: hcl.DiagWarning,
			Summary:  "Moved state would replace state",
			Detail: fmt.Sprintf("activity.%s already has state in %s, so the state of activity.%s is not moved there: it will be forgotten. Remove the moved block, or the state of activity.%s (wf state rm removes a whole instance).",
				c.To, p.wf.Address(), c.From, c.To),
			Subject: c.By.DeclRange.Ptr(),
		})
	}
	if len(renames) == 0 {
		return diags
	}
	p.records = make(map[string]*record.Activity, len(stored))
	for n, r := range stored {
		p.records[n] = r
	}
	for _, r := range renames {
		rec := *p.records[r.From]
		delete(p.records, r.From)
		rec.Name = r.To
		p.records[r.To] = &rec
		p.movedFrom[r.To] = r.From
	}
	return diags
}

// forEach plans an activity with for_each: each element when the
// collection is known now (it uses variables, locals, or outputs of
// activities that stay unchanged), else the activity as a whole, known
// after the activities it needs.
func (p *instancePlanner) forEach(a *config.Activity) ([]ActivityPlan, hcl.Diagnostics) {
	upstream := map[string]cty.Value{}
	known := true
	for _, dep := range a.ForEachDeps() {
		if p.actions[dep] != ActionUnchanged {
			known = false
			break
		}
		v, ok, err := p.value(dep, false)
		if err != nil || !ok {
			known = false
			break
		}
		upstream[dep] = v
	}
	var els []*config.Activity
	if known {
		var diags hcl.Diagnostics
		els, known, diags = a.Elements(upstream)
		if diags.HasErrors() {
			return nil, diags
		}
	}
	if !known {
		p.unknown[a.Name] = true
		p.actions[a.Name] = ActionRun
		ap := ActivityPlan{Name: a.Name, Kind: string(a.Kind), Action: ActionRun, DependsOn: slices.Clone(a.DependsOn), Generation: 1}
		for _, r := range a.Rules {
			ap.Rules = append(ap.Rules, RulePreview{On: slices.Clone(r.On), Preview: r.Policy.Preview(previewWaits)})
		}
		var deps []string
		for _, d := range a.ForEachDeps() {
			deps = append(deps, "activity."+d)
		}
		ap.KnownAfter = deps
		ap.Reason = "one element per key of for_each (known after " + strings.Join(deps, ", ") + ")"
		if n := p.storedElements(a.Name); n > 0 {
			ap.Reason += fmt.Sprintf("; the %d %s in state will run again or be forgotten", n, plural(n, "element", "elements"))
		}
		return []ActivityPlan{ap}, nil
	}
	p.elems[a.Name] = els
	out := make([]ActivityPlan, 0, len(els))
	var diags hcl.Diagnostics
	agg := ActionUnchanged
	for _, el := range els {
		ap, d := p.activity(el)
		diags = append(diags, d...)
		if ap.Action != ActionUnchanged {
			agg = ActionRun
		}
		out = append(out, ap)
	}
	p.actions[a.Name] = agg
	return out, diags
}

// storedElements counts the records of elements of block.
func (p *instancePlanner) storedElements(block string) int {
	n := 0
	for name := range p.records {
		if b, _, ok := config.SplitName(name); ok && b == block {
			n++
		}
	}
	return n
}

// removed plans the records that no activity or element claims: the
// apply forgets them (and cancels their pending retries).
func (p *instancePlanner) removed() []ActivityPlan {
	var out []ActivityPlan
	for _, name := range sortedNames(p.records) {
		if p.claimed[name] {
			continue
		}
		block, _, isElem := config.SplitName(name)
		decl := p.wf.Activity(block)
		if isElem && p.unknown[block] {
			continue // said on the activity's line
		}
		rec := p.records[name]
		ap := ActivityPlan{Name: name, Action: ActionRemove, Generation: rec.Generation}
		switch {
		case isElem && decl != nil && decl.ForEach != nil:
			ap.Reason = "no longer in for_each; its state will be forgotten"
		case isElem && decl != nil:
			ap.Reason = "activity." + block + " has no for_each any more; its state will be forgotten"
		case decl != nil:
			ap.Reason = "activity." + block + " has for_each now; its state as a single activity will be forgotten"
		default:
			ap.Reason = "removed from configuration; its state will be forgotten"
		}
		if t := rec.Timer; t != nil && t.Kind != record.TimerSleep {
			ap.Reason += fmt.Sprintf("; its pending retry (attempt %d) will be cancelled", t.Attempt)
		} else if t != nil {
			ap.Reason += "; its sleep will be cancelled"
		}
		if decl != nil {
			ap.Kind = string(decl.Kind)
		}
		if isElem {
			ap.Block = block
			_, k, _ := config.SplitName(name)
			ap.Key = &k
		}
		out = append(out, ap)
	}
	return out
}

// value is what expressions see of upstream dep, from the stored records:
// its outputs and error, with its status in a when (condition); for an
// activity with for_each, the map of its planned elements. ok is false
// when it cannot be known now (not in state, or its elements unknown).
func (p *instancePlanner) value(dep string, condition bool) (cty.Value, bool, error) {
	key := dep
	if condition {
		key = "\x00" + dep
	}
	if v, ok := p.vals[key]; ok {
		return v, v != cty.NilVal, nil
	}
	v, err := p.compute(dep, condition)
	if err != nil {
		return cty.NilVal, false, err
	}
	p.vals[key] = v
	return v, v != cty.NilVal, nil
}

func (p *instancePlanner) compute(dep string, condition bool) (cty.Value, error) {
	a := p.wf.Activity(dep)
	if a == nil {
		return cty.NilVal, nil
	}
	if _, _, isElem := config.SplitName(dep); !isElem && a.ForEach != nil {
		els, ok := p.elems[dep]
		if !ok {
			return cty.NilVal, nil
		}
		m := make(map[string]cty.Value, len(els))
		for _, el := range els {
			v, ok, err := p.value(el.Name, condition)
			if err != nil {
				return cty.NilVal, err
			}
			if !ok {
				return cty.NilVal, nil
			}
			m[el.Key] = v
		}
		return config.ElementsValue(m), nil
	}
	r := p.records[dep]
	if r == nil {
		return cty.NilVal, nil
	}
	up := config.Upstream{Kind: a.Kind, Status: statusWord(r.Status), Outputs: r.Outputs}
	if e := r.LastError; e != nil && r.Status == record.StatusFailed {
		up.ErrorType, up.ErrorMessage, up.HasError = e.Type, e.Message, true
	}
	if condition {
		return config.ConditionValue(up)
	}
	return config.UpstreamValue(up)
}

func statusWord(s record.Status) string {
	switch s {
	case record.StatusSucceeded:
		return config.StatusSucceeded
	case record.StatusFailed:
		return config.StatusFailed
	}
	return config.StatusSkipped
}

// activity plans one activity or element.
func (p *instancePlanner) activity(a *config.Activity) (ActivityPlan, hcl.Diagnostics) {
	ap, diags := p.planActivity(a)
	p.actions[a.Name] = ap.Action
	p.claimed[a.Name] = true
	if a.IsElement {
		ap.Block = a.Block
		k := a.Key
		ap.Key = &k
	}
	if from, ok := p.movedFrom[a.Name]; ok {
		ap.MovedFrom = "activity." + from
	}
	return ap, diags
}

func (p *instancePlanner) planActivity(a *config.Activity) (ActivityPlan, hcl.Diagnostics) {
	ap := ActivityPlan{
		Name:      a.Name,
		Kind:      string(a.Kind),
		DependsOn: slices.Clone(a.DependsOn),
	}
	for _, r := range a.Rules {
		ap.Rules = append(ap.Rules, RulePreview{On: slices.Clone(r.On), Preview: r.Policy.Preview(previewWaits)})
	}
	rec := p.records[a.Name]
	gen := 0
	if rec != nil {
		gen = rec.Generation
	}
	// fresh starts a new generation: new idempotency key, attempt 1.
	fresh := func(act Action, reason string) (ActivityPlan, hcl.Diagnostics) {
		ap.Action, ap.Reason, ap.Generation = act, reason, gen+1
		return ap, nil
	}

	switch {
	case rec == nil || rec.Generation == 0:
		return fresh(ActionRun, "")
	case rec.Status == record.StatusSkipped:
		if why, still := p.stillSkipped(a, rec); still {
			ap.Action, ap.Reason, ap.Generation = ActionUnchanged, why, gen
			return ap, nil
		}
		if rec.FailReason == "" || rec.FailReason == reasonUpstreamFailed {
			return fresh(ActionRun, "skipped last time: an upstream activity failed")
		}
		return fresh(ActionRun, "skipped last time ("+strings.ReplaceAll(rec.FailReason, "_", " ")+"); it may run now")
	case p.replace.replaced(p.wf.Name, a):
		return fresh(ActionRerun, "replacement requested")
	}

	switch rec.Status {
	case record.StatusSucceeded:
		if up := changedUpstream(a, p.actions); up != "" {
			return fresh(ActionRerun, fmt.Sprintf("upstream activity.%s will run", up))
		}
		res, diags := p.resolveDef(a)
		if diags.HasErrors() {
			return ap, diags
		}
		if !res.Matches(rec.DefHash) {
			return fresh(ActionRerun, "definition changed")
		}
		ap.Action, ap.Generation = ActionUnchanged, gen
		return ap, diags

	case record.StatusPending, record.StatusRunning, record.StatusWaiting:
		if rec.DefHash != "" && changedUpstream(a, p.actions) == "" {
			// Only a definite change re-runs an unfinished activity; an
			// activity that cannot be evaluated now simply resumes.
			if res, d := p.resolveDef(a); !d.HasErrors() && !res.Matches(rec.DefHash) {
				return fresh(ActionRerun, "definition changed while unfinished")
			}
		}
		ap.Action, ap.Generation = ActionResume, gen
		ap.ResumeAttempt, ap.DueAt, ap.Reason = resumePoint(rec, p.now, interruptOptOut(a.Rules))
		return ap, nil

	case record.StatusFailed:
		return fresh(ActionRetryFailed, failedReason(rec))
	}
	return ap, hcl.Diagnostics{{
		Severity: hcl.DiagError,
		Summary:  "Unknown activity status in state",
		Detail:   fmt.Sprintf("State records activity.%s of %s with status %q, which this version of wf does not know.", a.Name, p.wf.Address(), rec.Status),
	}}
}

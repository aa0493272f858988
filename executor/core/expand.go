package core

import (
	"fmt"
	"slices"

	"github.com/zclconf/go-cty/cty"

	"github.com/wf-engine/wf/config"
	"github.com/wf-engine/wf/executor/event"
	"github.com/wf-engine/wf/statefile/record"
)

// An activity with for_each is one node of the graph, a group, standing
// for all its elements: downstream activities depend on the group, and the
// group ends when every element has ended. Each element is an activity of
// its own (its own record, attempts, timers and idempotency key, all
// under its name NAME["KEY"]) whose upstreams are the activity's.
//
// A for_each known when the run starts (it uses only variables and
// locals, or outputs of upstreams that stay unchanged) is expanded at
// once. Otherwise the group waits for its upstreams like any activity and
// expands when they have ended; every element then runs from attempt 1,
// as anything downstream of an activity that ran does.

// group is the for_each part of a node.
type group struct {
	elems    []*act
	expanded bool
}

// actExt is what the language adds to an activity's node.
type actExt struct {
	// grp is set on the node of an activity with for_each.
	grp *group
	// Upstream bookkeeping (trigger.go): counted is set once unblock has
	// counted the upstreams; then pending are the ones still running or
	// waiting, failedUp those that failed (or were skipped because
	// something before them failed), skippedUp those skipped otherwise.
	counted                      bool
	pending, failedUp, skippedUp int
	// red removes the activity's secrets from what its attempts print.
	red *config.Redactor
}

// instExt is what the language adds to an instance.
type instExt struct {
	// byName finds nodes by name: activities, elements and groups.
	byName map[string]*act
	// state holds the stored records as the configuration now names
	// them (after moved blocks).
	state map[string]*record.Activity
	// loaded is the shell's map of the records as stored (state is it,
	// or a copy when blocks moved); claimed counts the records of state
	// that New gave a node of their name, so that settleState can tell
	// without a lookup per record that none is left over.
	loaded  map[string]*record.Activity
	claimed int
	// outs are the workflow's outputs (outputs.go).
	outs []*outState
	// red removes the configuration's secrets (redact.go).
	red *config.Redactor
	// settle is what Start persists and says first: the renames of
	// moved blocks (state.go).
	settle   []record.Mutation
	settleEv []event.Event
}

// buildInstance makes the nodes of one instance in topological order and
// wires them.
func (c *Core) buildInstance(in *inst, spec Instance) {
	in.byName = make(map[string]*act, len(spec.Workflow.Activities))
	in.acts = make([]*act, 0, len(spec.Workflow.Activities))
	in.red = config.NewRedactor(in.wf.Sensitive)
	in.loaded = c.opts.Activities[in.addr]
	in.state = c.applyMoves(in, in.loaded)
	for _, o := range in.wf.Outputs {
		in.outs = append(in.outs, &outState{o: o})
	}
	for _, ac := range topoOrder(spec.Workflow.Activities) {
		if ac.ForEach == nil {
			c.newAct(in, ac, spec.Modes)
			continue
		}
		g := &act{in: in, cfg: ac, heapIdx: -1, qIdx: -1, rule: -1, mode: ModeFresh, action: "run"}
		g.grp = &group{}
		// The group's record is its own, in memory: it is never stored.
		g.rec = &record.Activity{Workflow: in.wf.Name, Instance: in.wf.Key, Name: ac.Name, Status: record.StatusPending}
		if els, ok := c.knownElements(in, ac); ok {
			for _, el := range els {
				e := c.newAct(in, el, spec.Modes)
				g.grp.elems = append(g.grp.elems, e)
			}
			g.grp.expanded = true
		}
		// The group goes through its elements' breakers (so they are
		// ticked even when the elements are known only later); it never
		// starts an attempt itself.
		c.gatesOf(g)
		g.order = len(c.all)
		in.byName[ac.Name] = g
		in.acts = append(in.acts, g)
		c.all = append(c.all, g)
	}
	// in.acts is topological (elements before their group), so every
	// upstream already has its node and downstream lists come out in
	// topological order.
	for _, a := range in.acts {
		if a.grp != nil && a.grp.expanded {
			for _, e := range a.grp.elems {
				a.up = append(a.up, e)
				e.down = append(e.down, a)
			}
			continue
		}
		for _, name := range a.cfg.DependsOn {
			if u := in.byName[name]; u != nil && u != a && u.cfg.Name != a.cfg.Block {
				a.up = append(a.up, u)
				u.down = append(u.down, a)
			}
		}
	}
}

// newAct makes the node of one activity or element.
func (c *Core) newAct(in *inst, ac *config.Activity, modes map[string]Mode) *act {
	// A node from the slab is zero, like a new one: set field by field,
	// not as a literal, which is built aside and copied over 300-odd
	// bytes with a write barrier over all of them while the collector
	// runs (100,000 nodes at start-up).
	a := c.slab.act()
	a.in, a.cfg, a.order = in, ac, len(c.all)
	a.heapIdx, a.qIdx, a.rule = -1, -1, -1
	if r := in.state[ac.Name]; r != nil {
		in.claimed++
		// Without moved blocks state is the loaded map itself.
		if c.opts.OwnActivities && (len(in.wf.Moved) == 0 || r == in.loaded[ac.Name]) {
			a.rec = r
		} else {
			a.rec = c.slab.copy(r)
		}
	}
	// The store's timer index matches its records when it opens (wf
	// state check holds it to that), and a record it does not have has
	// no entry either.
	a.timerWritten = timerNone
	if a.rec != nil && a.rec.Timer != nil {
		a.timerWritten = timerSet
	}
	a.mode = modeFor(modes, ac.Name, a.rec)
	a.action = actionFor(a.mode, a.rec)
	for _, r := range ac.Rules {
		if r.Policy.Budget != "" {
			a.budget = r.Policy.Budget
			break
		}
	}
	c.gatesOf(a)
	in.byName[ac.Name] = a
	in.acts = append(in.acts, a)
	c.all = append(c.all, a)
	return a
}

// knownElements returns the elements of an activity with for_each when
// they are known before anything runs: the collection uses no activity,
// or only activities that stay unchanged in this run (their stored
// outputs are what it will see), exactly as the planner decides.
func (c *Core) knownElements(in *inst, ac *config.Activity) ([]*config.Activity, bool) {
	upstream := map[string]cty.Value{}
	for _, dep := range ac.ForEachDeps() {
		u := in.byName[dep]
		if u == nil || !unchanged(u) {
			return nil, false
		}
		v, err := c.upstreamValue(u, false)
		if err != nil {
			return nil, false
		}
		upstream[dep] = v
	}
	els, known, diags := ac.Elements(upstream)
	if !known || diags.HasErrors() {
		// An error is reported when the group expands at run time.
		return nil, false
	}
	return els, true
}

// unchanged reports whether a node stays as it is in this run and
// succeeded: its outputs are final before anything runs.
func unchanged(u *act) bool {
	if u.grp != nil {
		if !u.grp.expanded {
			return false
		}
		for _, e := range u.grp.elems {
			if !unchanged(e) {
				return false
			}
		}
		return true
	}
	return u.mode == ModeSkip && u.rec != nil && u.rec.Status == record.StatusSucceeded
}

// expand turns a group whose upstreams have ended into its elements. They
// start from attempt 1: their upstreams ran in this run.
func (c *Core) expand(g *act) {
	in := g.in
	upstream := map[string]cty.Value{}
	for _, u := range g.up {
		v, err := c.upstreamValue(u, false)
		if err != nil {
			c.failGroup(g, fmt.Sprintf("outputs of activity.%s: %v", u.cfg.Name, err))
			return
		}
		upstream[u.cfg.Name] = v
	}
	els, known, diags := g.cfg.Elements(upstream)
	switch {
	case diags.HasErrors():
		c.failGroup(g, in.red.String(diagText(diags)))
		return
	case !known:
		c.failGroup(g, "the for_each value is not known although its upstream activities have ended")
		return
	}
	ups := g.up
	g.up = nil
	keep := make(map[string]bool, len(els))
	for _, el := range els {
		e := c.newAct(in, el, nil)
		// Fresh, whatever the state says: an upstream ran.
		e.mode = ModeFresh
		e.action = actionFor(ModeFresh, e.rec)
		keep[el.Name] = true
		e.up = slices.Clone(ups)
		for _, u := range ups {
			u.down = append(u.down, e)
		}
		e.down = []*act{g}
		g.up = append(g.up, e)
		g.grp.elems = append(g.grp.elems, e)
		c.initActivity(e)
	}
	g.grp.expanded = true
	g.counted, g.pending, g.failedUp, g.skippedUp = true, len(g.grp.elems), 0, 0
	c.forgetStaleElements(in, g.cfg.Name, keep)
	ev := c.ev(g, event.ActivityExpanded)
	ev.Activities = c.planInfos(g.grp.elems)
	c.emit(ev)
	for _, e := range g.grp.elems {
		c.unblock(e)
	}
	if len(g.grp.elems) == 0 {
		c.finishGroup(g)
	}
}

// finishGroup ends a group once its elements have: failed when one of
// them failed (or was skipped because of a failure), skipped when all of
// them were skipped, succeeded otherwise (also without elements).
func (c *Core) finishGroup(g *act) {
	r := g.rec
	failed, skipped := 0, 0
	for _, e := range g.grp.elems {
		switch f, s := classify(e); {
		case f:
			failed++
		case s:
			skipped++
		}
	}
	switch {
	case failed > 0:
		r.Status, r.FailReason = record.StatusFailed, event.ReasonUpstreamFailed
	case skipped > 0 && skipped == len(g.grp.elems):
		r.Status, r.FailReason = record.StatusSkipped, event.ReasonUpstreamSkipped
	default:
		r.Status = record.StatusSucceeded
	}
	r.Finished = c.now
	g.phase = phaseDone
	c.ended(g)
}

// failGroup ends a group whose elements cannot be known (its for_each
// failed to evaluate): an error of the configuration, like an activity
// whose kind block fails to evaluate.
func (c *Core) failGroup(g *act, msg string) {
	r := g.rec
	r.Status, r.FailReason = record.StatusFailed, event.ReasonNonRetryable
	r.LastError = &record.Error{Type: "config", Message: msg, NonRetryable: true}
	r.Finished = c.now
	g.phase = phaseDone
	ev := c.ev(g, event.ActivityFailed)
	ev.Reason = r.FailReason
	ev.Error = evError(r.LastError)
	c.emit(ev)
	c.ended(g)
}

// skipGroup skips a group before it expanded (its trigger rule or an
// upstream said so); it has no elements in this run.
func (c *Core) skipGroup(g *act, reason string) {
	r := g.rec
	r.Status, r.FailReason, r.Finished = record.StatusSkipped, reason, c.now
	g.phase = phaseDone
	ev := c.ev(g, event.ActivitySkipped)
	ev.Reason = reason
	c.emit(ev)
	c.ended(g)
}

// planInfos describes nodes for the plan and activity_expanded events:
// elements with their group, groups not expanded yet with what they wait
// for; expanded groups are their elements.
func (c *Core) planInfos(acts []*act) []event.ActivityInfo {
	out := make([]event.ActivityInfo, 0, len(acts))
	for _, a := range acts {
		if a.grp != nil && a.grp.expanded {
			continue
		}
		info := event.ActivityInfo{
			Activity:    a.address(),
			Kind:        string(a.cfg.Kind),
			Action:      a.action,
			MaxAttempts: maxAttempts(a.cfg),
		}
		for _, u := range a.up {
			info.DependsOn = append(info.DependsOn, "activity."+u.cfg.Name)
		}
		switch {
		case a.cfg.IsElement:
			info.Block = "activity." + a.cfg.Block
		case a.grp != nil:
			for _, d := range a.cfg.ForEachDeps() {
				info.KnownAfter = append(info.KnownAfter, "activity."+d)
			}
		}
		if a.mode == ModeResume && a.rec != nil {
			info.Attempts = a.rec.Attempts
		}
		out = append(out, info)
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// upstreamValue is what expressions downstream of u see of it: its
// outputs and error (config.UpstreamValue), with its status too in a when
// (condition); for a group, the map of its elements' values. Cached once
// u has ended, since it no longer changes.
func (c *Core) upstreamValue(u *act, condition bool) (cty.Value, error) {
	late := u.lateFields()
	cache := &late.val
	if condition {
		cache = &late.cval
	}
	if *cache != cty.NilVal {
		return *cache, nil
	}
	var v cty.Value
	if u.grp != nil {
		m := make(map[string]cty.Value, len(u.grp.elems))
		for _, e := range u.grp.elems {
			ev, err := c.upstreamValue(e, condition)
			if err != nil {
				return cty.NilVal, fmt.Errorf("element %s: %w", e.cfg.Key, err)
			}
			m[e.cfg.Key] = ev
		}
		v = config.ElementsValue(m)
	} else {
		up := config.Upstream{Kind: u.cfg.Kind, Status: statusWord(u.rec.Status), Outputs: u.rec.Outputs}
		if e := u.rec.LastError; e != nil && u.rec.Status == record.StatusFailed {
			up.ErrorType, up.ErrorMessage, up.HasError = e.Type, e.Message, true
		}
		var err error
		if condition {
			v, err = config.ConditionValue(up)
		} else {
			v, err = config.UpstreamValue(up)
		}
		if err != nil {
			return cty.NilVal, err
		}
	}
	if u.phase == phaseDone {
		*cache = v
	}
	return v, nil
}

// statusWord is a record status as activity.NAME.status says it:
// succeeded, failed, or skipped (also for anything that did not end).
func statusWord(s record.Status) string {
	switch s {
	case record.StatusSucceeded:
		return config.StatusSucceeded
	case record.StatusFailed:
		return config.StatusFailed
	}
	return config.StatusSkipped
}

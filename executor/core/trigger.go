package core

import (
	"github.com/zclconf/go-cty/cty"

	"github.com/wf-engine/wf/config"
	"github.com/wf-engine/wf/executor/event"
	"github.com/wf-engine/wf/statefile/record"
)

// Whether a blocked activity runs is decided from how its upstreams ended
// and its trigger_rule (SPEC §10):
//
//	all_succeeded  runs once every upstream succeeded; skipped as soon as
//	               one failed (upstream_failed) or was skipped
//	               (upstream_skipped)
//	all_done       runs once every upstream ended, however
//	any_failed     runs once every upstream ended and one failed, else is
//	               skipped (no_upstream_failed)
//
// An upstream skipped because something before it failed counts as
// failed. An activity that may run then evaluates its when; false skips
// it (condition_false).

// unblock counts a blocked activity's upstreams from scratch and decides.
func (c *Core) unblock(a *act) {
	a.counted = true
	a.pending, a.failedUp, a.skippedUp = 0, 0, 0
	for _, u := range a.up {
		if u.phase != phaseDone {
			// Running, waiting, or held (which never ends in this run:
			// the activity stays blocked and pending).
			a.pending++
			continue
		}
		switch f, s := classify(u); {
		case f:
			a.failedUp++
		case s:
			a.skippedUp++
		}
	}
	c.trigger(a)
}

// ended tells the activities downstream of u that it has ended.
func (c *Core) ended(u *act) {
	f, s := classify(u)
	for _, d := range u.down {
		if d.phase != phaseBlocked || !d.counted {
			// Not counted yet: unblock counts u when it comes to d.
			continue
		}
		d.pending--
		switch {
		case f:
			d.failedUp++
		case s:
			d.skippedUp++
		}
		c.trigger(d)
	}
}

// classify says whether an ended node counts as failed, or as skipped
// (neither: it succeeded).
func classify(u *act) (failed, skipped bool) {
	switch u.rec.Status {
	case record.StatusSucceeded:
		return false, false
	case record.StatusFailed:
		return true, false
	case record.StatusSkipped:
		if u.rec.FailReason == event.ReasonUpstreamFailed {
			return true, false
		}
	}
	return false, true
}

// trigger acts on what a blocked activity's upstreams say.
func (c *Core) trigger(a *act) {
	if a.phase != phaseBlocked {
		return
	}
	if a.grp != nil && a.grp.expanded {
		// A group's upstreams are its elements; it ends with them.
		if a.pending == 0 {
			c.finishGroup(a)
		}
		return
	}
	run, reason := decide(a)
	switch {
	case reason != "":
		if a.grp != nil {
			c.skipGroup(a, reason)
		} else {
			c.skip(a, reason)
		}
	case !run:
		// Waiting for upstreams.
	case a.grp != nil:
		c.expand(a)
	case c.condition(a):
		c.enqueue(a, a.rec.Attempts+1, "")
	}
}

// decide applies the trigger rule: run, skip (reason set) or wait
// (neither).
func decide(a *act) (run bool, skipReason string) {
	switch a.cfg.TriggerRule {
	case config.TriggerAllDone:
		return a.pending == 0, ""
	case config.TriggerAnyFailed:
		switch {
		case a.pending > 0:
			return false, ""
		case a.failedUp > 0:
			return true, ""
		}
		return false, event.ReasonNoUpstreamFailed
	}
	switch {
	case a.failedUp > 0:
		return false, event.ReasonUpstreamFailed
	case a.skippedUp > 0:
		return false, event.ReasonUpstreamSkipped
	}
	return a.pending == 0, ""
}

// condition evaluates the activity's when, with every upstream's status,
// error and outputs in scope. False skips the activity; an error fails it
// (as a kind block that cannot be evaluated does). It reports whether the
// activity runs.
func (c *Core) condition(a *act) bool {
	if a.cfg.When == nil {
		return true
	}
	vals := make(map[string]cty.Value, len(a.up))
	for _, u := range a.up {
		v, err := c.upstreamValue(u, true)
		if err != nil {
			c.failConfig(a, "when: outputs of activity."+u.cfg.Name+": "+err.Error())
			return false
		}
		vals[u.cfg.Name] = v
	}
	ok, diags := a.cfg.Condition(vals)
	switch {
	case diags.HasErrors():
		c.failConfig(a, a.in.red.String(diagText(diags)))
		return false
	case !ok:
		c.skip(a, event.ReasonConditionFalse)
		return false
	}
	return true
}

// outcome counts how the activities ended and says how the run did: it
// failed when an activity failed that no all_done or any_failed activity
// downstream of it (however far) handled by succeeding, or when something
// could not end (held); interrupted when it was stopped first. Skipped
// activities never fail a run by themselves.
func (c *Core) outcome() (event.Summary, string) {
	sum := event.Summary{Attempts: c.attempts, Retries: c.retries, DurationMs: c.now.Sub(c.begin).Milliseconds()}
	for _, a := range c.all {
		if a.grp != nil && a.grp.expanded {
			continue // its elements are counted
		}
		sum.Activities++
		switch {
		case a.mode == ModeSkip:
			sum.Unchanged++
		case a.rec.Status == record.StatusSucceeded:
			sum.Succeeded++
		case a.rec.Status == record.StatusFailed:
			sum.Failed++
		case a.rec.Status == record.StatusSkipped:
			sum.Skipped++
		default:
			sum.Pending++
		}
	}
	switch {
	case c.stopped && sum.Pending > 0:
		return sum, event.StatusInterrupted
	case sum.Pending > 0 || c.unhandledFailures() > 0:
		return sum, event.StatusFailed
	}
	return sum, event.StatusSucceeded
}

// unhandledFailures counts the failed activities (and groups that could
// not expand) that no handler downstream of them succeeded for.
func (c *Core) unhandledFailures() int {
	handled := map[*act]bool{}
	var reaches func(a *act) bool // a succeeded handler is downstream of a
	reaches = func(a *act) bool {
		if h, ok := handled[a]; ok {
			return h
		}
		handled[a] = false
		for _, d := range a.down {
			if (d.grp == nil && d.cfg.TriggerRule.Handles() && d.rec.Status == record.StatusSucceeded) || reaches(d) {
				handled[a] = true
				break
			}
		}
		return handled[a]
	}
	n := 0
	for _, a := range c.all {
		if a.rec.Status != record.StatusFailed || a.mode == ModeSkip {
			continue
		}
		if a.grp != nil && a.grp.expanded {
			continue // its failed elements count
		}
		if !reaches(a) {
			n++
		}
	}
	return n
}

package planner

import (
	"github.com/zclconf/go-cty/cty"

	"github.com/wf-engine/wf/config"
	"github.com/wf-engine/wf/statefile/record"
)

// Skip reasons the core records (event.Reason*; the planner does not
// import the executor).
const (
	reasonUpstreamFailed   = "upstream_failed"
	reasonUpstreamSkipped  = "upstream_skipped"
	reasonNoUpstreamFailed = "no_upstream_failed"
	reasonConditionFalse   = "condition_false"
)

// stillSkipped reports whether an activity skipped last time would be
// skipped again, and why: its upstreams stay unchanged and its trigger
// rule or when say so again. It mirrors the core (executor/core,
// trigger.go) on the stored records, so a workflow whose compensation
// step was not needed plans as up to date.
func (p *instancePlanner) stillSkipped(a *config.Activity, rec *record.Activity) (string, bool) {
	switch rec.FailReason {
	case reasonUpstreamSkipped, reasonNoUpstreamFailed, reasonConditionFalse:
	default:
		return "", false // skipped because of a failure, or by an older wf
	}
	if changedUpstream(a, p.actions) != "" {
		return "", false
	}
	failedUp, skippedUp := 0, 0
	for _, dep := range a.DependsOn {
		f, s, ok := p.ended(dep)
		if !ok {
			return "", false
		}
		if f {
			failedUp++
		} else if s {
			skippedUp++
		}
	}
	switch a.TriggerRule {
	case config.TriggerAllDone:
	case config.TriggerAnyFailed:
		if failedUp == 0 {
			return "skipped: no upstream activity failed", true
		}
	default:
		if failedUp > 0 {
			return "", false
		}
		if skippedUp > 0 {
			return "skipped: an upstream activity was skipped", true
		}
	}
	if a.When == nil {
		return "", false
	}
	vals := map[string]cty.Value{}
	for _, dep := range a.DependsOn {
		v, ok, err := p.value(dep, true)
		if err != nil || !ok {
			return "", false
		}
		vals[dep] = v
	}
	run, diags := a.Condition(vals)
	if diags.HasErrors() || run {
		return "", false
	}
	return "skipped: when is false", true
}

// ended says how upstream dep ended in state: failed (or skipped because
// of a failure), skipped, or neither (succeeded).
func (p *instancePlanner) ended(dep string) (failed, skipped, ok bool) {
	a := p.wf.Activity(dep)
	if a == nil {
		return false, false, false
	}
	if a.ForEach != nil {
		els, known := p.elems[dep]
		if !known {
			return false, false, false
		}
		nf, ns := 0, 0
		for _, el := range els {
			f, s, ok := p.recordEnded(el.Name)
			if !ok {
				return false, false, false
			}
			if f {
				nf++
			} else if s {
				ns++
			}
		}
		return nf > 0, nf == 0 && ns > 0 && ns == len(els), true
	}
	return p.recordEnded(dep)
}

func (p *instancePlanner) recordEnded(name string) (failed, skipped, ok bool) {
	r := p.records[name]
	if r == nil {
		return false, false, false
	}
	switch r.Status {
	case record.StatusSucceeded:
		return false, false, true
	case record.StatusFailed:
		return true, false, true
	case record.StatusSkipped:
		return r.FailReason == reasonUpstreamFailed || r.FailReason == "", r.FailReason != reasonUpstreamFailed && r.FailReason != "", true
	}
	return false, false, false
}

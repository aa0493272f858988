package planner

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/wf-engine/wf/config"
	"github.com/wf-engine/wf/retry"
	"github.com/wf-engine/wf/statefile/record"
)

// Action is what the next apply does with one activity.
type Action string

const (
	ActionRun         Action = "run"          // never ran in this instance
	ActionRerun       Action = "rerun"        // succeeded before, runs again
	ActionResume      Action = "resume"       // unfinished: carries on where it stopped
	ActionRetryFailed Action = "retry_failed" // failed permanently; runs again from attempt 1
	ActionUnchanged   Action = "unchanged"    // succeeded with the same definition
	ActionRemove      Action = "remove"       // in state, no longer in the configuration: forgotten
)

// Symbol is the one-character plan symbol of the action (SPEC §5).
func (a Action) Symbol() string {
	switch a {
	case ActionRun:
		return "+"
	case ActionRerun:
		return "~"
	case ActionResume:
		return ">"
	case ActionRetryFailed:
		return "!"
	case ActionUnchanged:
		return "="
	case ActionRemove:
		return "-"
	}
	return "?"
}

// StateReader is the part of the state store the planner needs.
type StateReader interface {
	// Activities returns the records of one instance keyed by activity
	// name; an empty map when the instance is unknown.
	Activities(workflow, key string) (map[string]*record.Activity, error)
}

// Options select and steer a plan.
type Options struct {
	// Workflow restricts the plan to one workflow; "" plans all of them.
	Workflow string
	// Replace forces re-runs: "activity.NAME" (in every planned workflow)
	// or "WORKFLOW.activity.NAME", an element as activity.NAME["KEY"]; an
	// activity with for_each stands for all its elements.
	Replace []string
	// Now is the planning time: it stamps the plan and turns timers into
	// "due in" wording. Callers pass the wall clock.
	Now time.Time
}

// RulePreview is the schedule of one retry rule.
type RulePreview struct {
	On      []string      `json:"on,omitempty"`
	Preview retry.Preview `json:"preview"`
}

// ActivityPlan is the planned action for one activity, or one element of
// an activity with for_each.
type ActivityPlan struct {
	// Name is the name in state: NAME, or NAME["KEY"] for an element.
	Name string `json:"name"`
	// Block and Key are set on an element: its activity and key.
	Block     string        `json:"block,omitempty"`
	Key       *string       `json:"key,omitempty"`
	Kind      string        `json:"kind"`
	Action    Action        `json:"action"`
	Reason    string        `json:"reason,omitempty"`
	DependsOn []string      `json:"depends_on,omitempty"`
	Rules     []RulePreview `json:"rules,omitempty"`
	// KnownAfter is set on an activity whose for_each is not known yet:
	// the addresses of the activities it waits for. Its elements are
	// planned by the apply once those have run.
	KnownAfter []string `json:"known_after,omitempty"`
	// MovedFrom is set when a moved block carries the state of this
	// address over from another (activity.OLD).
	MovedFrom string `json:"moved_from,omitempty"`
	// ResumeAttempt and DueAt describe a resume: the attempt that starts
	// next and, when a timer is pending, when.
	ResumeAttempt int       `json:"resume_attempt,omitempty"`
	DueAt         time.Time `json:"due_at,omitzero"`
	// Generation is the generation the apply runs: the stored one for
	// resume and unchanged, the next one otherwise (a new idempotency key).
	Generation int `json:"generation"`
	// Breakers are the circuit breakers the activity is behind, as they
	// are now (breakers.go).
	Breakers []BreakerPlan `json:"breakers,omitempty"`
}

// InstancePlan is the plan for one workflow instance.
type InstancePlan struct {
	Workflow string `json:"workflow"`
	Key      string `json:"key"`
	// Activities in topological order.
	Activities []ActivityPlan `json:"activities"`
	// StateHash fingerprints the instance's records when planned, so that
	// applying a saved plan can refuse a state that moved on.
	StateHash string `json:"state_hash"`
}

// Address is "workflow/key".
func (ip *InstancePlan) Address() string { return ip.Workflow + "/" + ip.Key }

// HasChanges reports whether any activity of the instance would do work,
// be forgotten, or have its state moved.
func (ip *InstancePlan) HasChanges() bool {
	for _, a := range ip.Activities {
		if a.Action != ActionUnchanged || a.MovedFrom != "" {
			return true
		}
	}
	return false
}

// Plan is the plan for every selected instance.
type Plan struct {
	Instances  []InstancePlan `json:"instances"`
	ConfigHash string         `json:"config_hash"`
	Created    time.Time      `json:"created"`
}

// Counts tallies the actions; "retry failed" counts as run.
func (p *Plan) Counts() (run, rerun, resume, unchanged int) {
	for _, ip := range p.Instances {
		for _, a := range ip.Activities {
			switch a.Action {
			case ActionRun, ActionRetryFailed:
				run++
			case ActionRerun:
				rerun++
			case ActionResume:
				resume++
			case ActionUnchanged:
				unchanged++
			}
		}
	}
	return run, rerun, resume, unchanged
}

// Removed counts the activities and elements the apply forgets.
func (p *Plan) Removed() int {
	n := 0
	for _, ip := range p.Instances {
		for _, a := range ip.Activities {
			if a.Action == ActionRemove {
				n++
			}
		}
	}
	return n
}

// HasChanges reports whether applying the plan would do anything.
func (p *Plan) HasChanges() bool {
	for i := range p.Instances {
		if p.Instances[i].HasChanges() {
			return true
		}
	}
	return false
}

// previewWaits is how many waits a rule preview lists before "...".
const previewWaits = 6

// resolveFunc evaluates an activity's kind block; Build uses
// (*config.Activity).Resolve, tests substitute their own.
type resolveFunc func(a *config.Activity, upstream map[string]cty.Value) (*config.Resolved, hcl.Diagnostics)

// Build plans cfg against the state st (nil means empty state). It returns
// a nil plan when there are errors: a dependency cycle, an unknown
// workflow or -replace address, unreadable state, or an activity that can
// no longer be evaluated against its upstream outputs.
func Build(cfg *config.Config, st StateReader, opts Options) (*Plan, hcl.Diagnostics) {
	return build(cfg, st, opts, (*config.Activity).Resolve)
}

func build(cfg *config.Config, st StateReader, opts Options, resolve resolveFunc) (*Plan, hcl.Diagnostics) {
	var diags hcl.Diagnostics
	wfs := cfg.Workflows
	if opts.Workflow != "" {
		wfs = nil
		var names []string
		for _, wf := range cfg.Workflows {
			names = append(names, wf.Name)
			if wf.Name == opts.Workflow {
				wfs = append(wfs, wf)
			}
		}
		if len(wfs) == 0 {
			return nil, append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Unknown workflow",
				Detail:   fmt.Sprintf("No workflow %q in the configuration; declared: %s.%s", opts.Workflow, listOrNone(names), didYouMean(opts.Workflow, names)),
			})
		}
	}
	replace, rdiags := parseReplace(opts.Replace, wfs)
	diags = append(diags, rdiags...)

	p := &Plan{ConfigHash: cfg.Hash, Created: opts.Now}
	for _, wf := range wfs {
		ip, d := planInstance(wf, st, opts.Now, replace, resolve)
		diags = append(diags, d...)
		if ip != nil {
			p.Instances = append(p.Instances, *ip)
		}
	}
	states, d := breakerStates(cfg, st, opts.Now)
	diags = append(diags, d...)
	if diags.HasErrors() {
		return nil, diags
	}
	attachBreakers(p, cfg, states)
	return p, diags
}

func listOrNone(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// changedUpstream names the first upstream activity that will not stay
// unchanged, or "" when all of them do.
func changedUpstream(a *config.Activity, actions map[string]Action) string {
	for _, up := range a.DependsOn {
		if actions[up] != ActionUnchanged {
			return up
		}
	}
	return ""
}

// resolveDef resolves a with its upstream outputs as stored in state, to
// compare its definition with the stored hash.
func (p *instancePlanner) resolveDef(a *config.Activity) (*config.Resolved, hcl.Diagnostics) {
	// Only what the kind block reads: the value of a fan-out named by
	// depends_on alone would decode every element's stored outputs.
	upstream := make(map[string]cty.Value, len(a.ResolveDeps))
	for _, up := range a.ResolveDeps {
		v, ok, err := p.value(up, false)
		if err != nil {
			return nil, hcl.Diagnostics{{
				Severity: hcl.DiagError,
				Summary:  "Cannot decode stored outputs",
				Detail:   fmt.Sprintf("decode outputs of activity.%s in %s: %v", up, p.wf.Address(), err),
				Subject:  a.DeclRange.Ptr(),
			}}
		}
		if ok {
			upstream[up] = v // a missing one is reported by Resolve
		}
	}
	res, diags := p.resolve(a, upstream)
	if res == nil && !diags.HasErrors() {
		diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Cannot evaluate activity", Detail: "activity." + a.Name + " could not be evaluated", Subject: a.DeclRange.Ptr()})
	}
	return res, diags
}

// resumePoint says which attempt a resumed activity starts next, when, and
// why. optOut says the policy lists "interrupted" in non_retryable_errors.
func resumePoint(rec *record.Activity, now time.Time, optOut bool) (attempt int, due time.Time, reason string) {
	if rec.Status == record.StatusRunning {
		n := max(rec.Attempts, 1)
		if optOut {
			return n + 1, time.Time{}, fmt.Sprintf("attempt %d was interrupted; the policy says a person must check it (non_retryable_errors has \"interrupted\"): the apply fails it", n)
		}
		return n + 1, time.Time{}, fmt.Sprintf("attempt %d was interrupted; attempt %d starts at once (interrupted attempts count against no limit)", n, n+1)
	}
	if t := rec.Timer; t != nil {
		switch {
		case t.Kind == record.TimerSleep:
			return t.Attempt, t.FireAt, "sleeping until " + t.FireAt.Format(time.RFC3339)
		case t.Kind == record.TimerBudget:
			return t.Attempt, t.FireAt, fmt.Sprintf("attempt %d waits for the retry budget, %s", t.Attempt, dueText(t.FireAt, now))
		case t.Kind == record.TimerCircuit:
			return t.Attempt, t.FireAt, fmt.Sprintf("attempt %d waits for its circuit breaker, %s", t.Attempt, dueText(t.FireAt, now))
		case t.Source == sourceInterrupted:
			return t.Attempt, t.FireAt, fmt.Sprintf("attempt %d %s (attempt %d was interrupted; it counts against no limit)", t.Attempt, dueText(t.FireAt, now), t.Attempt-1)
		default:
			return t.Attempt, t.FireAt, fmt.Sprintf("attempt %d %s", t.Attempt, dueText(t.FireAt, now))
		}
	}
	if rec.Attempts == 0 {
		return 1, time.Time{}, "not started yet"
	}
	return rec.Attempts + 1, time.Time{}, fmt.Sprintf("attempt %d starts next", rec.Attempts+1)
}

func dueText(at, now time.Time) string {
	if !at.After(now) {
		return "due now"
	}
	return fmt.Sprintf("due in %s (%s)", formatDuration(roundForHumans(at.Sub(now))), at.Format(time.RFC3339))
}

// sourceInterrupted is the timer source the executor records after an
// interrupted attempt (event.SourceInterrupted; the planner does not
// import the executor).
const sourceInterrupted = "interrupted"

// reasonInterrupted is the failure reason of an interrupted attempt whose
// policy opted out of resuming it (event.ReasonInterrupted).
const reasonInterrupted = "interrupted"

// interruptOptOut reports whether the retry rules opt out of resuming an
// interrupted attempt: the first rule matching the error type
// "interrupted" lists exactly "interrupted" in non_retryable_errors. It
// mirrors core.InterruptOptOut.
func interruptOptOut(rules []retry.Rule) bool {
	for _, rule := range rules {
		if len(rule.On) == 0 || retry.MatchAny(rule.On, "interrupted") {
			return slices.Contains(rule.Policy.NonRetryable, "interrupted")
		}
	}
	return false
}

func failedReason(rec *record.Activity) string {
	if rec.FailReason == reasonInterrupted {
		return fmt.Sprintf("interrupted at attempt %d: the policy says a person must check it first (non_retryable_errors has \"interrupted\"); runs again from attempt 1", max(rec.Attempts, 1))
	}
	var b strings.Builder
	b.WriteString("failed last time")
	switch {
	case rec.LastError != nil && rec.FailReason != "":
		fmt.Fprintf(&b, ": %s (%s)", rec.LastError.Type, rec.FailReason)
	case rec.LastError != nil:
		fmt.Fprintf(&b, ": %s", rec.LastError.Type)
	case rec.FailReason != "":
		fmt.Fprintf(&b, " (%s)", rec.FailReason)
	}
	b.WriteString("; runs again from attempt 1")
	return b.String()
}

// sortedNames returns the record names in order.
func sortedNames(records map[string]*record.Activity) []string {
	names := make([]string, 0, len(records))
	for name, r := range records {
		if r != nil {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}

// hashRecords fingerprints an instance's records: sha256 over their JSON,
// sorted by activity name.
func hashRecords(records map[string]*record.Activity) (string, error) {
	names := make([]string, 0, len(records))
	for name, r := range records {
		if r != nil {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	list := make([]*record.Activity, len(names))
	for i, name := range names {
		list[i] = records[name]
	}
	b, err := json.Marshal(list)
	if err != nil {
		return "", fmt.Errorf("marshal records: %w", err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

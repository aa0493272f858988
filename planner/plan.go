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
	// or "WORKFLOW.activity.NAME".
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

// ActivityPlan is the planned action for one activity.
type ActivityPlan struct {
	Name      string        `json:"name"`
	Kind      string        `json:"kind"`
	Action    Action        `json:"action"`
	Reason    string        `json:"reason,omitempty"`
	DependsOn []string      `json:"depends_on,omitempty"`
	Rules     []RulePreview `json:"rules,omitempty"`
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

// HasChanges reports whether any activity of the instance would do work.
func (ip *InstancePlan) HasChanges() bool {
	for _, a := range ip.Activities {
		if a.Action != ActionUnchanged {
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
				Detail:   fmt.Sprintf("No workflow %q in the configuration; declared: %s.", opts.Workflow, listOrNone(names)),
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

// replaceSet holds "workflow\x00activity" pairs to replace.
type replaceSet map[string]bool

func replaceKey(wf, activity string) string { return wf + "\x00" + activity }

func parseReplace(addrs []string, wfs []*config.Workflow) (replaceSet, hcl.Diagnostics) {
	var diags hcl.Diagnostics
	set := replaceSet{}
	for _, addr := range addrs {
		var wfName, name string
		parts := strings.Split(addr, ".")
		switch {
		case len(parts) == 2 && parts[0] == "activity" && parts[1] != "":
			name = parts[1]
		case len(parts) == 3 && parts[1] == "activity" && parts[0] != "" && parts[2] != "":
			wfName, name = parts[0], parts[2]
		default:
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Invalid replace address",
				Detail:   fmt.Sprintf("%q is not an activity address; use activity.NAME or WORKFLOW.activity.NAME.", addr),
			})
			continue
		}
		var matches []string
		for _, wf := range wfs {
			if (wfName == "" || wf.Name == wfName) && wf.Activity(name) != nil {
				matches = append(matches, wf.Name)
			}
		}
		if d := checkReplaceMatches(addr, name, matches); d != nil {
			diags = append(diags, d)
			continue
		}
		set[replaceKey(matches[0], name)] = true
	}
	return set, diags
}

// checkReplaceMatches says what is wrong with a -replace address that
// matched the activity name in the workflows named by matches: nothing
// (nil) when it is exactly one; an error when it is none, or when a short
// address (activity.NAME) names an activity of several workflows, listing
// the full addresses to choose from, so that one -replace never re-runs
// two activities by surprise. Every form of -replace address goes through
// it.
func checkReplaceMatches(addr, name string, matches []string) *hcl.Diagnostic {
	switch len(matches) {
	case 1:
		return nil
	case 0:
		return &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Replace address matches no activity",
			Detail:   fmt.Sprintf("-replace=%s does not name an activity of the planned workflows.", addr),
		}
	}
	full := make([]string, len(matches))
	for i, wf := range matches {
		full[i] = "-replace=" + wf + ".activity." + name
	}
	return &hcl.Diagnostic{
		Severity: hcl.DiagError,
		Summary:  "Ambiguous replace address",
		Detail: fmt.Sprintf("-replace=%s names an activity of %d workflows; say which with its full address: %s.",
			addr, len(matches), strings.Join(full, " or ")),
	}
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
	ip := &InstancePlan{Workflow: wf.Name, Key: wf.Key, StateHash: stateHash}
	actions := map[string]Action{}
	for _, name := range g.Order() {
		a := wf.Activity(name)
		ap, d := planActivity(wf, a, records, actions, now, replace[replaceKey(wf.Name, name)], resolve)
		diags = append(diags, d...)
		actions[name] = ap.Action
		ip.Activities = append(ip.Activities, ap)
	}
	return ip, diags
}

func planActivity(wf *config.Workflow, a *config.Activity, records map[string]*record.Activity, actions map[string]Action,
	now time.Time, replaced bool, resolve resolveFunc) (ActivityPlan, hcl.Diagnostics) {
	ap := ActivityPlan{
		Name:      a.Name,
		Kind:      string(a.Kind),
		DependsOn: slices.Clone(a.DependsOn),
	}
	for _, r := range a.Rules {
		ap.Rules = append(ap.Rules, RulePreview{On: slices.Clone(r.On), Preview: r.Policy.Preview(previewWaits)})
	}
	rec := records[a.Name]
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
		return fresh(ActionRun, "skipped last time: an upstream activity failed")
	case replaced:
		return fresh(ActionRerun, "replacement requested")
	}

	switch rec.Status {
	case record.StatusSucceeded:
		if up := changedUpstream(a, actions); up != "" {
			return fresh(ActionRerun, fmt.Sprintf("upstream activity.%s will run", up))
		}
		res, diags := resolveDef(wf, a, records, resolve)
		if diags.HasErrors() {
			return ap, diags
		}
		if !res.Matches(rec.DefHash) {
			return fresh(ActionRerun, "definition changed")
		}
		ap.Action, ap.Generation = ActionUnchanged, gen
		return ap, diags

	case record.StatusPending, record.StatusRunning, record.StatusWaiting:
		if rec.DefHash != "" && changedUpstream(a, actions) == "" {
			// Only a definite change re-runs an unfinished activity; an
			// activity that cannot be evaluated now simply resumes.
			if res, d := resolveDef(wf, a, records, resolve); !d.HasErrors() && !res.Matches(rec.DefHash) {
				return fresh(ActionRerun, "definition changed while unfinished")
			}
		}
		ap.Action, ap.Generation = ActionResume, gen
		ap.ResumeAttempt, ap.DueAt, ap.Reason = resumePoint(rec, now, interruptOptOut(a.Rules))
		return ap, nil

	case record.StatusFailed:
		return fresh(ActionRetryFailed, failedReason(rec))
	}
	return ap, hcl.Diagnostics{{
		Severity: hcl.DiagError,
		Summary:  "Unknown activity status in state",
		Detail:   fmt.Sprintf("State records activity.%s of %s with status %q, which this version of wf does not know.", a.Name, wf.Address(), rec.Status),
	}}
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
func resolveDef(wf *config.Workflow, a *config.Activity, records map[string]*record.Activity, resolve resolveFunc) (*config.Resolved, hcl.Diagnostics) {
	upstream := make(map[string]cty.Value, len(a.DependsOn))
	for _, up := range a.DependsOn {
		r := records[up]
		if r == nil {
			continue // Resolve reports the missing outputs
		}
		v, err := config.OutputsValue(r.Outputs)
		if err != nil {
			return nil, hcl.Diagnostics{{
				Severity: hcl.DiagError,
				Summary:  "Cannot decode stored outputs",
				Detail:   fmt.Sprintf("decode outputs of activity.%s in %s: %v", up, wf.Address(), err),
				Subject:  a.DeclRange.Ptr(),
			}}
		}
		upstream[up] = v
	}
	res, diags := resolve(a, upstream)
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

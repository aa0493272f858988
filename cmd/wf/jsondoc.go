package main

// The -json documents of the commands that read (SPEC §8). Each is one
// JSON object with a format_version, documented in docs/commands.md;
// wf history -json prints one such object per attempt, one per line.
// Nothing in them is ever cut short: messages, outputs and captured
// streams are whole (the captured streams are the tail the engine keeps,
// with their sizes before the cut).
//
// format_version follows Terraform's rule: the minor version grows when
// fields are added, the major version when a field changes meaning or
// goes away.

import (
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/hashicorp/hcl/v2"

	"github.com/wf-engine/wf/planner"
	"github.com/wf-engine/wf/retry"
	"github.com/wf-engine/wf/statefile/record"
)

// jsonFormatVersion is the format_version of every -json document of this
// file (wf stats has its own, statsFormatVersion).
const jsonFormatVersion = "1.0"

// writeJSON prints v indented, as one document.
func writeJSON(w io.Writer, what string, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false) // "symbol": ">", not "\u003e"
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("write %s: %w", what, err)
	}
	return nil
}

// ---- wf version -json --------------------------------------------------

type versionDoc struct {
	FormatVersion string `json:"format_version"`
	Version       string `json:"version"`
	GoVersion     string `json:"go_version"`
	Platform      string `json:"platform"`
}

// ---- wf validate -json -------------------------------------------------

type validateDoc struct {
	FormatVersion string           `json:"format_version"`
	Valid         bool             `json:"valid"`
	ErrorCount    int              `json:"error_count"`
	WarningCount  int              `json:"warning_count"`
	Diagnostics   []diagnosticJSON `json:"diagnostics"`
}

type diagnosticJSON struct {
	Severity string     `json:"severity"` // "error" or "warning"
	Summary  string     `json:"summary"`
	Detail   string     `json:"detail,omitempty"`
	Range    *rangeJSON `json:"range,omitempty"`
}

type rangeJSON struct {
	Filename string  `json:"filename"`
	Start    posJSON `json:"start"`
	End      posJSON `json:"end"`
}

type posJSON struct {
	Line   int `json:"line"`
	Column int `json:"column"`
	Byte   int `json:"byte"`
}

func newValidateDoc(diags hcl.Diagnostics) validateDoc {
	doc := validateDoc{FormatVersion: jsonFormatVersion, Diagnostics: []diagnosticJSON{}}
	for _, d := range diags {
		dj := diagnosticJSON{Summary: d.Summary, Detail: d.Detail, Severity: "error"}
		if d.Severity == hcl.DiagWarning {
			dj.Severity = "warning"
			doc.WarningCount++
		} else {
			doc.ErrorCount++
		}
		if r := d.Subject; r != nil {
			dj.Range = &rangeJSON{
				Filename: r.Filename,
				Start:    posJSON{Line: r.Start.Line, Column: r.Start.Column, Byte: r.Start.Byte},
				End:      posJSON{Line: r.End.Line, Column: r.End.Column, Byte: r.End.Byte},
			}
		}
		doc.Diagnostics = append(doc.Diagnostics, dj)
	}
	doc.Valid = doc.ErrorCount == 0
	return doc
}

// ---- wf plan -json -----------------------------------------------------

type planDoc struct {
	FormatVersion string             `json:"format_version"`
	Created       time.Time          `json:"created"`
	Changes       bool               `json:"changes"`
	Summary       planSummaryJSON    `json:"summary"`
	Instances     []planInstanceJSON `json:"instances"`
}

type planSummaryJSON struct {
	Run       int `json:"run"`
	Rerun     int `json:"rerun"`
	Resume    int `json:"resume"`
	Unchanged int `json:"unchanged"`
}

type planInstanceJSON struct {
	Instance   string             `json:"instance"`
	Workflow   string             `json:"workflow"`
	Key        string             `json:"key"`
	Activities []planActivityJSON `json:"activities"`
}

type planActivityJSON struct {
	Activity string `json:"activity"`
	Kind     string `json:"kind"`
	// Action is run, rerun, resume, retry_failed or unchanged (SPEC §5).
	Action     string   `json:"action"`
	Symbol     string   `json:"symbol"`
	Reason     string   `json:"reason,omitempty"`
	DependsOn  []string `json:"depends_on"`
	Generation int      `json:"generation"`
	// ResumeAttempt and DueAt: the attempt a resume starts and, when a
	// timer is pending, when it is due.
	ResumeAttempt int                   `json:"resume_attempt,omitempty"`
	DueAt         *time.Time            `json:"due_at,omitempty"`
	Retry         []planRuleJSON        `json:"retry"`
	Breakers      []planner.BreakerPlan `json:"breakers,omitempty"`
}

// planRuleJSON is the schedule preview of one retry rule, in numbers.
type planRuleJSON struct {
	// On lists the error patterns of the rule; empty for the catch-all.
	On []string `json:"on"`
	// MaxAttempts is 0 for unlimited.
	MaxAttempts int `json:"max_attempts"`
	// WaitsMs are the base waits (before jitter) between attempts; More
	// says that more follow than are listed.
	WaitsMs []int64 `json:"waits_ms"`
	More    bool    `json:"more"`
	// TotalWaitMs is the most waiting the schedule allows; null when
	// unbounded.
	TotalWaitMs     *int64  `json:"total_wait_ms"`
	Jitter          string  `json:"jitter"`
	JitterFraction  float64 `json:"jitter_fraction,omitempty"`
	ExpirationMs    int64   `json:"expiration_ms,omitempty"`
	Forever         bool    `json:"forever"`
	MaxRetryAfterMs int64   `json:"max_retry_after_ms,omitempty"`
}

func newPlanDoc(p *planner.Plan) planDoc {
	run, rerun, resume, unchanged := p.Counts()
	doc := planDoc{
		FormatVersion: jsonFormatVersion,
		Created:       p.Created,
		Changes:       p.HasChanges(),
		Summary:       planSummaryJSON{Run: run, Rerun: rerun, Resume: resume, Unchanged: unchanged},
		Instances:     []planInstanceJSON{},
	}
	for _, ip := range p.Instances {
		ij := planInstanceJSON{Instance: ip.Address(), Workflow: ip.Workflow, Key: ip.Key, Activities: []planActivityJSON{}}
		for _, ap := range ip.Activities {
			aj := planActivityJSON{
				Activity:      "activity." + ap.Name,
				Kind:          ap.Kind,
				Action:        string(ap.Action),
				Symbol:        ap.Action.Symbol(),
				Reason:        ap.Reason,
				DependsOn:     []string{},
				Generation:    ap.Generation,
				ResumeAttempt: ap.ResumeAttempt,
				Retry:         []planRuleJSON{},
				Breakers:      ap.Breakers,
			}
			for _, d := range ap.DependsOn {
				aj.DependsOn = append(aj.DependsOn, "activity."+d)
			}
			if !ap.DueAt.IsZero() {
				aj.DueAt = ptr(ap.DueAt)
			}
			for _, r := range ap.Rules {
				aj.Retry = append(aj.Retry, newPlanRule(r))
			}
			ij.Activities = append(ij.Activities, aj)
		}
		doc.Instances = append(doc.Instances, ij)
	}
	return doc
}

func newPlanRule(r planner.RulePreview) planRuleJSON {
	pv := r.Preview
	rj := planRuleJSON{
		On:              append([]string{}, r.On...),
		MaxAttempts:     pv.Attempts,
		WaitsMs:         []int64{},
		More:            pv.More,
		Jitter:          string(pv.Jitter.Mode),
		ExpirationMs:    pv.Expiration.Milliseconds(),
		Forever:         pv.Forever,
		MaxRetryAfterMs: pv.RetryAfterCap.Milliseconds(),
	}
	if rj.Jitter == "" {
		rj.Jitter = string(retry.JitterNone)
	}
	if pv.Jitter.Mode != retry.JitterNone {
		rj.JitterFraction = pv.Jitter.Fraction
	}
	for _, w := range pv.Waits {
		rj.WaitsMs = append(rj.WaitsMs, w.Milliseconds())
	}
	if pv.TotalWait > 0 {
		rj.TotalWaitMs = ptr(pv.TotalWait.Milliseconds())
	}
	return rj
}

// ---- wf state list -json -----------------------------------------------

type stateListDoc struct {
	FormatVersion string              `json:"format_version"`
	Instances     []stateListInstance `json:"instances"`
}

type stateListInstance struct {
	Instance   string         `json:"instance"`
	Workflow   string         `json:"workflow"`
	Key        string         `json:"key"`
	Created    time.Time      `json:"created"`
	Updated    time.Time      `json:"updated"`
	Activities int            `json:"activities"`
	Statuses   map[string]int `json:"statuses"`
}

func newStateListInstance(in *record.Instance, acts map[string]*record.Activity) stateListInstance {
	li := stateListInstance{
		Instance: in.Address(), Workflow: in.Workflow, Key: in.Key,
		Created: in.Created, Updated: in.Updated,
		Activities: len(acts), Statuses: map[string]int{},
	}
	for _, a := range acts {
		li.Statuses[string(a.Status)]++
	}
	return li
}

// ---- wf state show -json -----------------------------------------------

type stateShowDoc struct {
	FormatVersion string              `json:"format_version"`
	Instance      string              `json:"instance"`
	Workflow      string              `json:"workflow"`
	Key           string              `json:"key"`
	Created       time.Time           `json:"created"`
	Updated       time.Time           `json:"updated"`
	Activities    []stateActivityJSON `json:"activities"`
}

type stateActivityJSON struct {
	Activity       string          `json:"activity"`
	Status         record.Status   `json:"status"`
	Reason         string          `json:"reason,omitempty"`
	Generation     int             `json:"generation"`
	Attempts       int             `json:"attempts"`
	Interrupted    int             `json:"interrupted,omitempty"`
	IdempotencyKey string          `json:"idempotency_key"`
	FirstStart     *time.Time      `json:"first_start,omitempty"`
	Finished       *time.Time      `json:"finished,omitempty"`
	Timer          *timerJSON      `json:"timer,omitempty"`
	Outputs        json.RawMessage `json:"outputs,omitempty"`
	LastError      *record.Error   `json:"last_error,omitempty"`
	// HeartbeatDetails is what the last attempt reported as its progress.
	HeartbeatDetails string `json:"heartbeat_details,omitempty"`
	DefinitionHash   string `json:"definition_hash"`
	// LastAttempt is the activity's latest attempt, with what it printed.
	LastAttempt *historyEntry `json:"last_attempt,omitempty"`
}

type timerJSON struct {
	Kind    record.TimerKind `json:"kind"`
	Attempt int              `json:"attempt"`
	FireAt  time.Time        `json:"fire_at"`
	Set     time.Time        `json:"set"`
	DelayMs int64            `json:"delay_ms"`
	Source  string           `json:"source,omitempty"`
}

func newStateShowDoc(inst *record.Instance, acts map[string]*record.Activity, last map[string]*record.Attempt) stateShowDoc {
	doc := stateShowDoc{
		FormatVersion: jsonFormatVersion,
		Instance:      inst.Address(), Workflow: inst.Workflow, Key: inst.Key,
		Created: inst.Created, Updated: inst.Updated,
		Activities: []stateActivityJSON{},
	}
	for _, a := range sortedActivities(acts) {
		aj := stateActivityJSON{
			Activity: "activity." + a.Name, Status: a.Status, Reason: a.FailReason,
			Generation: a.Generation, Attempts: a.Attempts, Interrupted: a.Interrupted,
			IdempotencyKey: a.IdempotencyKey, Outputs: a.Outputs, LastError: a.LastError,
			HeartbeatDetails: a.HeartbeatDetails, DefinitionHash: a.DefHash,
		}
		if !a.FirstStart.IsZero() {
			aj.FirstStart = ptr(a.FirstStart)
		}
		if !a.Finished.IsZero() {
			aj.Finished = ptr(a.Finished)
		}
		if t := a.Timer; t != nil {
			aj.Timer = &timerJSON{Kind: t.Kind, Attempt: t.Attempt, FireAt: t.FireAt, Set: t.Set, DelayMs: t.Delay.Milliseconds(), Source: t.Source}
		}
		if at := last[a.Name]; at != nil {
			e := newHistoryEntry(at)
			e.FormatVersion = ""
			aj.LastAttempt = &e
		}
		doc.Activities = append(doc.Activities, aj)
	}
	return doc
}

// lastAttempts is each activity's latest attempt, from the instance's
// whole attempt log (ordered by activity, generation and number).
func lastAttempts(atts []*record.Attempt) map[string]*record.Attempt {
	out := map[string]*record.Attempt{}
	for _, a := range atts {
		out[a.Activity] = a
	}
	return out
}

// ---- wf history -json --------------------------------------------------

// historyEntry is the -json form of one attempt, one per line. Durations
// are in milliseconds, as in the events of wf apply -json.
type historyEntry struct {
	FormatVersion  string         `json:"format_version,omitempty"`
	Workflow       string         `json:"workflow"`
	Instance       string         `json:"instance"`
	Activity       string         `json:"activity"`
	Generation     int            `json:"generation"`
	Attempt        int            `json:"attempt"`
	IdempotencyKey string         `json:"idempotency_key"`
	Start          time.Time      `json:"start"`
	End            *time.Time     `json:"end,omitempty"`
	DurationMs     *int64         `json:"duration_ms,omitempty"`
	Outcome        record.Outcome `json:"outcome"`
	Error          *record.Error  `json:"error,omitempty"`
	WaitMs         *int64         `json:"wait_ms,omitempty"`
	WaitSource     string         `json:"wait_source,omitempty"`
	FiredBy        string         `json:"fired_by,omitempty"`
	// Output is the tail of what the attempt printed (exec) or received
	// (http), with the sizes of the whole streams.
	Output *record.Output `json:"output,omitempty"`
}

// newHistoryEntry is the -json form of attempt a.
func newHistoryEntry(a *record.Attempt) historyEntry {
	e := historyEntry{
		FormatVersion:  jsonFormatVersion,
		Workflow:       a.Workflow,
		Instance:       a.Workflow + "/" + a.Instance,
		Activity:       "activity." + a.Activity,
		Generation:     a.Generation,
		Attempt:        a.Number,
		IdempotencyKey: a.IdempotencyKey,
		Start:          a.Start,
		Outcome:        a.Outcome,
		Error:          a.Error,
		WaitSource:     a.WaitSource,
		FiredBy:        a.FiredBy,
		Output:         a.Output,
	}
	if !a.End.IsZero() {
		e.End = ptr(a.End)
		e.DurationMs = ptr(a.End.Sub(a.Start).Milliseconds())
	}
	if a.HasWait {
		e.WaitMs = ptr(a.Wait.Milliseconds())
	}
	return e
}

func ptr[T any](v T) *T { return &v }

package core

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"

	"github.com/wf-engine/wf/config"
	"github.com/wf-engine/wf/executor/event"
	"github.com/wf-engine/wf/retry"
	"github.com/wf-engine/wf/statefile/record"
)

// ---- helpers ------------------------------------------------------------

func (c *Core) ev(a *act, t event.Type) event.Event {
	var ev event.Event
	c.fillEv(&ev, a, t, c.ruleRefFor(a))
	return ev
}

// ruleRefFor is a.ruleRef() in the next element of an array shared with
// other events' (a few a step, one allocation every stepChunk): an event
// is never changed once emitted, nor is its rule reference.
func (c *Core) ruleRefFor(a *act) *event.RuleRef {
	if len(a.cfg.Rules) == 0 || a.rec == nil {
		return nil
	}
	if len(c.rulesFree) == 0 {
		c.rulesFree = make([]event.RuleRef, stepChunk)
	}
	ref := &c.rulesFree[0]
	c.rulesFree = c.rulesFree[1:]
	return a.ruleRefIn(ref)
}

// fillEv sets what every event of an activity says into ev (which is
// zero), with rule as its rule reference.
func (c *Core) fillEv(ev *event.Event, a *act, t event.Type, rule *event.RuleRef) {
	ev.Time = c.now
	ev.Type = t
	ev.Workflow = a.in.wf.Name
	ev.Instance = a.in.addr
	ev.Activity = a.address()
	ev.Kind = string(a.cfg.Kind)
	ev.MaxAttempts = a.maxAttempts()
	ev.Rule = rule
	ev.Budget = c.usage(a)
	if a.rec != nil {
		ev.Interrupted = a.rec.Interrupted
	}
}

// maxAttempts is the limit shown for an activity: the speaking rule's, else
// its last rule's (the catch-all), 1 without any retry rule, 0 for
// unlimited.
func (a *act) maxAttempts() int {
	if i := a.speakingRule(); i >= 0 {
		return a.cfg.Rules[i].Policy.MaximumAttempts
	}
	return maxAttempts(a.cfg)
}

// speakingRule is the index of the rule whose limit applies: the one that
// decided the last failure, the only one, or after a resume the one the
// last error matches (the first whose on patterns match, as retry.Decide
// picks); -1 when none has spoken yet.
func (a *act) speakingRule() int {
	rules := a.cfg.Rules
	switch {
	case a.rule >= 0 && a.rule < len(rules):
		return a.rule
	case len(rules) == 1:
		return 0
	case a.rec == nil || a.rec.LastError == nil || a.rec.LastError.NonRetryable || a.rec.LastError.Type == TypeInterrupted:
		return -1
	}
	for i, r := range rules {
		if len(r.On) == 0 || retry.MatchAny(r.On, a.rec.LastError.Type) {
			return i
		}
	}
	return -1
}

// ruleRef says which rule speaks and what the rules have counted, so that
// views never show more attempts than the limit (see event.RuleRef).
func (a *act) ruleRef() *event.RuleRef { return a.ruleRefIn(nil) }

// ruleRefIn is ruleRef written into *into (nil: a new one).
func (a *act) ruleRefIn(into *event.RuleRef) *event.RuleRef {
	if len(a.cfg.Rules) == 0 || a.rec == nil {
		return nil
	}
	ref := into
	if ref == nil {
		ref = new(event.RuleRef)
	}
	*ref = event.RuleRef{Rules: len(a.cfg.Rules)}
	for _, n := range a.rec.RuleCounts {
		ref.CountedAll += n
	}
	if i := a.speakingRule(); i >= 0 {
		ref.Index, ref.On = i+1, a.cfg.Rules[i].On
		if i < len(a.rec.RuleCounts) {
			ref.Counted = a.rec.RuleCounts[i]
		}
	}
	return ref
}

// attemptOutput is the tail of what an attempt printed, from its
// outputs; nil when it printed nothing.
func attemptOutput(res Result) *event.Output {
	if p := res.Printed; p.Known {
		return event.NewOutput(p.Stdout, p.Stderr, p.Body)
	}
	if len(res.Outputs) == 0 {
		return nil
	}
	var o struct{ Stdout, Stderr, Body string }
	if json.Unmarshal(res.Outputs, &o) != nil {
		return nil
	}
	return event.NewOutput(o.Stdout, o.Stderr, o.Body)
}

// recordOutput is out as the attempt record keeps it.
func recordOutput(out *event.Output) *record.Output {
	if out == nil {
		return nil
	}
	r := record.Output(*out)
	return &r
}

// attachOutput gives the attempt_succeeded or attempt_failed event of
// attempt number of activity emitted since index from the tail of what
// the attempt printed.
func (c *Core) attachOutput(from int, activity string, number int, out *event.Output) {
	if out == nil || from >= len(c.out.Events) {
		return
	}
	name := "activity." + activity
	for i := from; i < len(c.out.Events); i++ {
		ev := &c.out.Events[i]
		if (ev.Type == event.AttemptSucceeded || ev.Type == event.AttemptFailed) && ev.Attempt == number && ev.Activity == name {
			ev.Output = out
			return
		}
	}
}

func maxAttempts(a *config.Activity) int {
	if len(a.Rules) == 0 {
		return 1
	}
	return a.Rules[len(a.Rules)-1].Policy.MaximumAttempts
}

func evError(e *record.Error) *event.Error {
	if e == nil {
		return nil
	}
	return &event.Error{Type: e.Type, Message: e.Message, NonRetryable: e.NonRetryable}
}

func diagText(diags hcl.Diagnostics) string {
	var parts []string
	for _, d := range diags {
		if d.Severity != hcl.DiagError {
			continue
		}
		s := d.Summary
		if d.Detail != "" {
			s += ": " + d.Detail
		}
		if d.Subject != nil {
			s = d.Subject.String() + ": " + s
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, "; ")
}

func timePtr(t time.Time) *time.Time { return &t }

func copyActivity(r *record.Activity) record.Activity {
	cp := *r
	if r.Timer != nil {
		t := *r.Timer
		cp.Timer = &t
	}
	if r.LastError != nil {
		e := *r.LastError
		cp.LastError = &e
	}
	if r.RuleCounts != nil {
		cp.RuleCounts = append([]int(nil), r.RuleCounts...)
	}
	return cp
}

func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}

package core

import (
	"encoding/json"
	"slices"
	"strings"
	"time"

	"github.com/wf-engine/wf/executor/event"
	"github.com/wf-engine/wf/retry"
	"github.com/wf-engine/wf/statefile/record"
)

func (c *Core) result(res Result) {
	a := c.find(res.Workflow+"/"+res.Instance, res.Activity)
	if a == nil || a.phase != phaseRunning || a.cur == nil || a.cur.Number != res.Number {
		// Stale or unknown: nothing in flight matches it.
		return
	}
	res = c.redact(a, res)
	c.running--
	// The attempt's events carry the tail of what it printed (the
	// dashboard's l view, for wf apply and wf watch alike), and so does its
	// record (wf history -output).
	printed := attemptOutput(res)
	a.cur.Output = recordOutput(printed)
	defer c.attachOutput(len(c.out.Events), res.Activity, res.Number, printed)
	end := res.End
	if end.IsZero() {
		end = c.now
	}
	if d := boundDetails(res.HeartbeatDetails); d != "" && d != a.rec.HeartbeatDetails {
		a.rec.HeartbeatDetails = d
		c.markAct(a)
	}
	// The gates hear how it ended after the attempt's own events, so a
	// breaker that opens now says so after the retry it schedules.
	gateEnd := attemptEnd{failure: res.Failure, interrupted: res.Interrupted}
	defer c.release(a, &gateEnd)
	switch {
	case res.Interrupted:
		msg := "cancelled by the engine"
		if res.Failure != nil && res.Failure.Message != "" {
			msg = res.Failure.Message
		}
		c.interrupted(a, msg, end)
		return
	case res.Failure != nil:
		c.failure(a, *res.Failure, end)
		return
	}
	out := res.Outputs
	if len(out) == 0 {
		out = json.RawMessage(`{}`)
	}
	c.succeed(a, out, end)
}

func (c *Core) failure(a *act, f retry.Failure, end time.Time) {
	att := a.cur
	r := a.rec
	att.End = end
	att.Outcome = record.OutcomeFailed
	att.Error = &record.Error{Type: f.Type, Message: f.Message, NonRetryable: f.NonRetryable}
	c.markAtt(att)
	e := *att.Error
	r.LastError = &e
	a.cur = nil

	dec := retry.Decide(retry.Input{
		Rules:   a.cfg.Rules,
		Failure: f,
		// retry_if's attempt counts the attempts that count: the
		// interrupted ones are numbered but never counted (SPEC §4.1).
		Attempt:    att.Number - r.Interrupted,
		RuleCounts: r.RuleCounts,
		FirstStart: r.FirstStart,
		Now:        c.now,
		PrevDelay:  r.LastDelay,
		Rand:       c.jitterRand(att),
	})
	if dec.RuleCounts != nil {
		r.RuleCounts = append([]int(nil), dec.RuleCounts...)
	}
	if dec.Rule >= 0 {
		a.rule = dec.Rule
	}
	failed := c.ev(a, event.AttemptFailed)
	failed.Attempt = att.Number
	failed.Error = evError(att.Error)
	failed.DurationMs = event.Ms(end.Sub(att.Start))

	if !dec.Retry {
		c.emit(failed)
		ferr := *att.Error
		if dec.Err != nil {
			ferr.Message = strings.TrimSpace(ferr.Message + "; retry_if: " + dec.Err.Error())
		}
		c.fail(a, dec.Reason, ferr)
		return
	}
	// The retry gate: the budget of the rule that decided.
	var g *budgetGate
	if dec.Rule >= 0 && dec.Rule < len(a.cfg.Rules) {
		if name := a.cfg.Rules[dec.Rule].Policy.Budget; name != "" {
			g = c.budgetGateOf(name)
			a.budget = name
		}
	}
	next := att.Number + 1
	if g == nil {
		c.emit(failed)
		c.armRetry(a, att, next, dec)
		return
	}
	v := g.ask(c, a, askOpts{})
	switch v.kind {
	case goNow:
		failed.Budget = c.usage(a)
		c.emit(failed)
		c.armRetry(a, att, next, dec)
	case never:
		c.emit(failed)
		c.fail(a, v.reason, v.err)
	default:
		c.emit(failed)
		att.Wait, att.HasWait, att.WaitSource = max(v.at.Sub(c.now), dec.Delay), true, event.SourceBudget
		r.LastDelay = dec.Delay
		c.await(a, g, v, next, dec.Delay)
	}
}

// interrupted records an attempt the engine cut short. It never ends the
// activity (SPEC §4.1): whatever the attempt limits, retryable_errors,
// ordered rules, retry_if, expiration or budget say, the next attempt is
// due at once, with the same idempotency key. The interrupted attempt is
// numbered but counted by no rule, takes no budget token and leaves the
// previous wait (decorrelated jitter) alone. The one way out is the
// opt-out: a matching rule whose non_retryable_errors lists
// "interrupted" fails the activity with reason interrupted.
func (c *Core) interrupted(a *act, msg string, end time.Time) {
	att := a.cur
	r := a.rec
	att.End = end
	att.Outcome = record.OutcomeInterrupted
	att.Error = &record.Error{Type: TypeInterrupted, Message: msg}
	c.markAtt(att)
	e := *att.Error
	r.LastError = &e
	r.Interrupted++
	a.cur = nil

	failed := c.ev(a, event.AttemptFailed)
	failed.Attempt = att.Number
	failed.Error = evError(att.Error)
	failed.DurationMs = event.Ms(end.Sub(att.Start))
	c.emit(failed)
	if InterruptOptOut(a.cfg.Rules) {
		e.NonRetryable = true
		e.Message = strings.TrimSpace(msg + "; the retry policy lists \"interrupted\" in non_retryable_errors: check what the attempt did before running it again")
		c.fail(a, event.ReasonInterrupted, e)
		return
	}
	att.Wait, att.HasWait, att.WaitSource = 0, true, event.SourceInterrupted
	r.Status = record.StatusWaiting
	r.Timer = &record.Timer{Kind: record.TimerRetry, FireAt: c.now, Attempt: att.Number + 1, Set: c.now, Source: event.SourceInterrupted}
	c.markAct(a)
	c.armTimer(a)
	ev := c.ev(a, event.RetryScheduled)
	ev.Attempt = att.Number + 1
	ev.DelayMs = event.Ms(0)
	ev.DelaySource = event.SourceInterrupted
	ev.FireAt = timePtr(c.now)
	c.emit(ev)
}

// TypeInterrupted is the error type of an attempt the engine cut short.
const TypeInterrupted = "interrupted"

// InterruptOptOut reports whether rules opt out of resuming interrupted
// attempts: the first rule that matches the error type "interrupted" (the
// one that would decide it) lists exactly "interrupted" in its
// non_retryable_errors. A wildcard such as "*" does not opt out: it is
// written for the activity's own errors.
func InterruptOptOut(rules []retry.Rule) bool {
	for _, rule := range rules {
		if len(rule.On) == 0 || retry.MatchAny(rule.On, TypeInterrupted) {
			return slices.Contains(rule.Policy.NonRetryable, TypeInterrupted)
		}
	}
	return false
}

// jitterRand is the random source of the decision after att.
func (c *Core) jitterRand(att *record.Attempt) retry.Rand {
	if c.opts.Rand != nil {
		return c.opts.Rand
	}
	return JitterRand(c.opts.Seed, att.Workflow, att.Instance, att.Activity, att.Generation, att.Number)
}

func (c *Core) armRetry(a *act, att *record.Attempt, next int, dec retry.Decision) {
	delay, source := dec.Delay, dec.Source
	if att != nil {
		att.Wait, att.HasWait, att.WaitSource = delay, true, source
		c.markAtt(att)
	}
	r := a.rec
	r.LastDelay = delay
	r.Status = record.StatusWaiting
	r.Timer = &record.Timer{Kind: record.TimerRetry, FireAt: c.now.Add(delay), Attempt: next, Set: c.now, Delay: delay, Source: source}
	c.markAct(a)
	c.armTimer(a)
	ev := c.ev(a, event.RetryScheduled)
	ev.Attempt = next
	ev.DelayMs = event.Ms(delay)
	ev.DelaySource = source
	if dec.Capped {
		ev.DelayCapped, ev.RequestedDelayMs = true, event.Ms(dec.Requested)
	}
	ev.FireAt = timePtr(r.Timer.FireAt)
	c.emit(ev)
}

func (c *Core) fail(a *act, reason string, e record.Error) {
	r := a.rec
	r.Status = record.StatusFailed
	r.FailReason = reason
	r.LastError = &e
	r.Timer = nil
	r.Finished = c.now
	c.markAct(a)
	a.cur = nil
	a.phase = phaseDone
	ev := c.ev(a, event.ActivityFailed)
	ev.Attempt = r.Attempts
	ev.Reason = reason
	ev.Error = evError(&e)
	c.emit(ev)
	c.cascade(a)
}

// failConfig fails an activity whose kind block cannot be evaluated: no
// attempt is made, and retrying could not help.
func (c *Core) failConfig(a *act, msg string) {
	c.fail(a, event.ReasonNonRetryable, record.Error{Type: "config", Message: msg, NonRetryable: true})
}

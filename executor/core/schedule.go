package core

import (
	"container/heap"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/zclconf/go-cty/cty"

	"github.com/wf-engine/wf/config"
	"github.com/wf-engine/wf/executor/event"
	"github.com/wf-engine/wf/statefile/record"
)

// ---- transitions --------------------------------------------------------

func (c *Core) enqueue(a *act, number int, firedBy string) {
	a.next, a.firedBy = number, firedBy
	if a.cfg.Kind == config.KindSleep && !c.stopped {
		c.startAttempt(a)
		return
	}
	a.phase = phaseQueued
	heap.Push(&c.queue, a)
}

// pump starts queued attempts while slots are free.
func (c *Core) pump() {
	for !c.stopped && c.queue.Len() > 0 && (c.opts.Parallelism <= 0 || c.running < c.opts.Parallelism) {
		a := heap.Pop(&c.queue).(*act)
		if c.admit(a) {
			c.startAttempt(a)
		}
	}
}

func (c *Core) startAttempt(a *act) {
	// nil when the kind block reads no upstream value (a fan-out's
	// activities): a map it never reads was an allocation per attempt.
	var upstream map[string]cty.Value
	if len(a.cfg.ResolveDeps) > 0 {
		upstream = make(map[string]cty.Value, len(a.cfg.ResolveDeps))
	}
	for _, u := range a.up {
		// Only what the kind block reads: the value of an upstream named
		// by depends_on alone is never used, and that of a fan-out
		// decodes the outputs of every element.
		if _, reads := slices.BinarySearch(a.cfg.ResolveDeps, u.cfg.Name); !reads {
			continue
		}
		v, err := c.upstreamValue(u, false)
		if err != nil {
			c.release(a, nil)
			c.failConfig(a, fmt.Sprintf("outputs of activity.%s: %v", u.cfg.Name, err))
			return
		}
		upstream[u.cfg.Name] = v
	}
	res, diags := c.resolve(a.cfg, upstream)
	if diags.HasErrors() || res == nil {
		msg := "the activity could not be evaluated"
		if diags.HasErrors() {
			msg = diagText(diags)
		}
		c.release(a, nil)
		c.failConfig(a, a.in.red.String(msg))
		return
	}
	c.setRedactor(a, res)
	r := a.rec
	n := a.next
	if n < 1 {
		n = 1
	}
	if n == 1 {
		r.DefHash = res.Hash()
		r.FirstStart = c.now
	}
	r.Attempts = n
	due := r.Timer // the timer that started this attempt, if any
	r.Timer = nil
	r.Status = record.StatusRunning
	att := &record.Attempt{
		Workflow:       r.Workflow,
		Instance:       r.Instance,
		Activity:       r.Name,
		Generation:     r.Generation,
		Number:         n,
		IdempotencyKey: r.IdempotencyKey,
		Start:          c.now,
		Outcome:        record.OutcomeRunning,
		FiredBy:        a.firedBy,
	}
	a.cur = att
	a.firedBy = ""
	c.markAtt(att)
	c.attempts++
	if n > 1 {
		c.retries++
	}
	ev := c.ev(a, event.AttemptStarted)
	ev.Attempt = n
	ev.IdempotencyKey = r.IdempotencyKey
	if n > 1 {
		ev.PreviousError = evError(r.LastError)
	}
	if due != nil && att.FiredBy != "manual" {
		ev.ScheduledAt = timePtr(due.FireAt)
	}

	if res.Sleep != nil {
		r.Status = record.StatusWaiting
		r.Timer = &record.Timer{Kind: record.TimerSleep, FireAt: c.now.Add(res.Sleep.Duration), Attempt: n, Set: c.now, Delay: res.Sleep.Duration}
		// Views show "sleeping 4m left" from the wake-up time.
		fire := r.Timer.FireAt
		ev.FireAt = &fire
		c.emit(ev)
		c.markAct(a)
		c.armTimer(a)
		return
	}
	c.emit(ev)
	c.markAct(a)
	a.phase = phaseRunning
	c.running++
	c.out.Start = append(roomFor1(c.out.Start), Attempt{
		Workflow:       r.Workflow,
		Instance:       r.Instance,
		Activity:       r.Name,
		Generation:     r.Generation,
		Number:         n,
		IdempotencyKey: r.IdempotencyKey,
		Spec:           res,
		Timeout:        a.cfg.Timeout,
		// Heartbeats are an exec attempt's; the details are its
		// predecessors' progress.
		HeartbeatTimeout: a.cfg.HeartbeatTimeout,
		HeartbeatDetails: r.HeartbeatDetails,
	})
}

func (c *Core) succeed(a *act, outputs json.RawMessage, end time.Time) {
	att := a.cur
	att.End = end
	att.Outcome = record.OutcomeSucceeded
	c.markAtt(att)
	r := a.rec
	r.Status = record.StatusSucceeded
	r.Outputs = outputs
	r.Timer = nil
	r.LastError = nil
	r.FailReason = ""
	r.Finished = end
	c.markAct(a)
	a.cur = nil
	a.phase = phaseDone

	ev := c.ev(a, event.AttemptSucceeded)
	ev.Attempt = att.Number
	ev.DurationMs = event.Ms(end.Sub(att.Start))
	c.emit(ev)
	ev = c.ev(a, event.ActivitySucceeded)
	ev.Attempt = att.Number
	ev.DurationMs = event.Ms(end.Sub(r.FirstStart))
	c.emit(ev)
	c.ended(a)
}

// skip ends an activity that does not run (reason: why, see trigger.go).
func (c *Core) skip(a *act, reason string) {
	r := a.rec
	r.Status = record.StatusSkipped
	r.FailReason = reason
	r.Timer = nil
	r.Finished = c.now
	c.markAct(a)
	a.phase = phaseDone
	ev := c.ev(a, event.ActivitySkipped)
	ev.Reason = reason
	c.emit(ev)
	c.cascade(a)
}

// cascade tells the activities downstream of a that it ended.
func (c *Core) cascade(a *act) { c.ended(a) }

// ---- completion ---------------------------------------------------------

func (c *Core) checkDone() {
	if c.finished || !c.started || c.running > 0 {
		return
	}
	if !c.stopped && (c.timers.Len() > 0 || c.queue.Len() > 0) {
		return
	}
	// Counting and the run's status: trigger.go.
	sum, status := c.outcome()
	c.finished = true
	c.status = status
	ev := event.Event{Time: c.now, Type: event.RunCompleted, Status: status, Summary: &sum}
	if len(c.insts) == 1 {
		ev.Workflow = c.insts[0].wf.Name
		ev.Instance = c.insts[0].addr
	}
	c.emit(ev)
	c.out.Done = true
	c.out.Status = status
}

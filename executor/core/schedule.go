package core

import (
	"container/heap"
	"encoding/json"
	"fmt"
	"time"

	"github.com/zclconf/go-cty/cty"

	"github.com/wf-engine/wf/config"
	"github.com/wf-engine/wf/executor/event"
	"github.com/wf-engine/wf/statefile/record"
)

func (c *Core) unblock(a *act) {
	a.unmet = 0
	for _, u := range a.up {
		switch {
		case u.rec.Status == record.StatusSucceeded && u.phase == phaseDone:
		case u.phase == phaseDone:
			c.skip(a)
			return
		default:
			// Running, waiting, or held (which never ends in this run:
			// the activity stays blocked and pending).
			a.unmet++
		}
	}
	if a.unmet == 0 {
		c.enqueue(a, a.rec.Attempts+1, "")
	}
}

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
	upstream := make(map[string]cty.Value, len(a.up))
	for _, u := range a.up {
		v, err := config.OutputsValue(u.rec.Outputs)
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
		c.failConfig(a, msg)
		return
	}
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
	c.out.Start = append(c.out.Start, Attempt{
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

	for _, d := range a.down {
		if d.phase == phaseBlocked {
			d.unmet--
			if d.unmet <= 0 {
				c.enqueue(d, d.rec.Attempts+1, "")
			}
		}
	}
}

func (c *Core) skip(a *act) {
	r := a.rec
	r.Status = record.StatusSkipped
	r.Timer = nil
	r.Finished = c.now
	c.markAct(a)
	a.phase = phaseDone
	ev := c.ev(a, event.ActivitySkipped)
	ev.Reason = event.ReasonUpstreamFailed
	c.emit(ev)
	c.cascade(a)
}

func (c *Core) cascade(a *act) {
	for _, d := range a.down {
		if d.phase == phaseBlocked {
			c.skip(d)
		}
	}
}

// ---- completion ---------------------------------------------------------

func (c *Core) checkDone() {
	if c.finished || !c.started || c.running > 0 {
		return
	}
	if !c.stopped && (c.timers.Len() > 0 || c.queue.Len() > 0) {
		return
	}
	sum := event.Summary{Activities: len(c.all), Attempts: c.attempts, Retries: c.retries, DurationMs: c.now.Sub(c.begin).Milliseconds()}
	for _, a := range c.all {
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
	status := event.StatusSucceeded
	switch {
	case c.stopped && sum.Pending > 0:
		status = event.StatusInterrupted
	case sum.Failed > 0 || sum.Skipped > 0 || sum.Pending > 0:
		status = event.StatusFailed
	}
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

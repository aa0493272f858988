package core

import (
	"slices"
	"time"

	"github.com/wf-engine/wf/config"

	"github.com/wf-engine/wf/executor/event"
	"github.com/wf-engine/wf/retry"
	"github.com/wf-engine/wf/statefile/record"
)

// A gate is something an attempt must pass besides its retry policy: a
// circuit breaker before any attempt starts, a retry budget before a
// retry is scheduled. Every gate answers the one question "may this
// attempt go?" with one of three verdicts (now; at T; never, because ...),
// and the machine handles the verdicts alike: go on, wait on a durable
// timer of the gate's kind, or fail the activity. So the next gate (a rate
// limit, a concurrency limit) is one more implementation, and a gate may
// keep its state in the core (a breaker's window, a budget's stamps) or
// ask someone else (the Temporal engine's cluster-wide budgets).
type gate interface {
	// ask asks for one pass for a's next attempt at c.now, and takes it
	// when it is granted (a token, a trial slot). The ticket of a granted
	// pass is handed back to done or cancel.
	ask(c *Core, a *act, opts askOpts) verdict
	// cancel gives back a pass that was granted in this step but not
	// used (another gate of the same stage said no, or the attempt could
	// not be started).
	cancel(c *Core, a *act, ticket int)
	// done tells the gate how the attempt it let through ended.
	done(c *Core, a *act, ticket int, end attemptEnd)
	// timerKind is the kind of the durable timer of an attempt that
	// waits for the gate.
	timerKind() record.TimerKind
	// waitEvent is what the views are told when a waits for the gate;
	// a.rec.Timer is the timer it waits on.
	waitEvent(c *Core, a *act, v verdict) event.Event
}

// askOpts qualify a question to a gate.
type askOpts struct {
	// force is an operator's retry fired by hand: a gate that may be
	// overridden (a budget) grants it.
	force bool
	// failFast turns a wait into a refusal (on_open = "fail").
	failFast bool
}

type verdictKind uint8

const (
	// goNow: the pass is granted.
	goNow verdictKind = iota
	// waitUntil: ask again at verdict.at, or, when that is zero, once
	// the gate changes (a breaker's trial call ends).
	waitUntil
	// never: the activity fails with verdict.reason and verdict.err.
	never
)

// verdict is a gate's answer.
type verdict struct {
	kind   verdictKind
	ticket int
	at     time.Time
	reason string
	err    record.Error
}

// attemptEnd is how an attempt ended, as a gate that counts outcomes
// sees it.
type attemptEnd struct {
	failure     *retry.Failure // nil: succeeded
	interrupted bool           // cut short by the engine: never counts
}

// gateUse is a gate an activity's attempts must pass before they start,
// and what they do while it says wait.
type gateUse struct {
	g        gate
	failFast bool
}

// admit asks every start gate of a for a pass for its next attempt. When
// all grant one, the attempt may start (the passes are kept in a.tickets
// until it ends). Otherwise the passes granted so far are given back and
// the first gate that did not grant one decides: a waits for it, or fails.
func (c *Core) admit(a *act) bool {
	if len(a.starts) == 0 {
		return true
	}
	for i, u := range a.starts {
		v := u.g.ask(c, a, askOpts{failFast: u.failFast})
		if v.kind == goNow {
			a.tickets[i] = v.ticket
			continue
		}
		for j := range i {
			a.starts[j].g.cancel(c, a, a.tickets[j])
		}
		if v.kind == never {
			c.fail(a, v.reason, v.err)
		} else {
			c.await(a, u.g, v, a.next, 0)
		}
		return false
	}
	a.admitted = true
	return true
}

// release gives the start gates of a their passes back: cancelled when
// the attempt never started (end nil), else with how it ended.
func (c *Core) release(a *act, end *attemptEnd) {
	if !a.admitted {
		return
	}
	a.admitted = false
	for i, u := range a.starts {
		if end == nil {
			u.g.cancel(c, a, a.tickets[i])
		} else {
			u.g.done(c, a, a.tickets[i], *end)
		}
	}
}

// await records that a's attempt next waits for g: a durable timer of
// g's kind at v.at. With no time (until g changes) the timer is due at
// once, so that a restarted run asks again at once, and in this run the
// activity waits on g's list instead of the timer heap. delay is the
// backoff the attempt must still have waited (see fire).
func (c *Core) await(a *act, g gate, v verdict, next int, delay time.Duration) {
	r := a.rec
	fire := v.at
	if fire.IsZero() {
		fire = c.now
	}
	r.Status = record.StatusWaiting
	r.Timer = &record.Timer{Kind: g.timerKind(), FireAt: fire, Attempt: next, Set: c.now, Delay: delay, Source: string(g.timerKind())}
	c.markAct(a)
	if v.at.IsZero() {
		a.phase = phaseGate
		c.parked[g] = append(c.parked[g], a)
	} else {
		c.armTimer(a)
	}
	c.emit(g.waitEvent(c, a, v))
}

// wakeParked lets every activity waiting for g until it changes ask
// again, in activity order.
func (c *Core) wakeParked(g gate) {
	list := c.parked[g]
	if len(list) == 0 {
		return
	}
	delete(c.parked, g)
	for _, a := range list {
		if a.phase != phaseGate || a.rec.Timer == nil {
			continue
		}
		// The wait ends now, not when the timer was recorded.
		a.rec.Timer.FireAt = c.now
		c.enqueue(a, a.rec.Timer.Attempt, "")
	}
}

// parkedCount is how many activities wait for a gate to change.
func (c *Core) parkedCount() int {
	n := 0
	for _, l := range c.parked {
		n += len(l)
	}
	return n
}

// gatesOf collects the start gates of a: every breaker its retry rules
// name, once each; on_open is the first naming rule's. A sleep starts no
// attempt that could fail, so it passes no gate.
func (c *Core) gatesOf(a *act) {
	if a.cfg.Kind == config.KindSleep {
		return
	}
	for _, r := range a.cfg.Rules {
		g := c.breakers[r.Policy.CircuitBreaker]
		if g == nil || slices.ContainsFunc(a.starts, func(u gateUse) bool { return u.g == gate(g) }) {
			continue
		}
		a.starts = append(a.starts, gateUse{g: g, failFast: r.Policy.OnOpen == "fail"})
	}
	a.tickets = make([]int, len(a.starts))
}

// unstick: with nothing running no trial call can be in flight, so no
// activity may stay parked; this only guards the bookkeeping.
func (c *Core) unstick() {
	if c.stopped || c.running > 0 || len(c.parked) == 0 {
		return
	}
	for _, g := range c.breakerList {
		g.trials = 0
		c.wakeParked(g)
	}
	c.pump()
}

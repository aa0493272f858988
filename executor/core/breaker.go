package core

import (
	"fmt"
	"time"

	"github.com/wf-engine/wf/executor/event"
	"github.com/wf-engine/wf/retry"
	"github.com/wf-engine/wf/statefile/record"
)

// Circuit breakers (SPEC §11). A breaker is a gate asked before every
// attempt of the activities behind it starts, first attempts included,
// and told how each attempt it let through ended. Its state and window
// are durable (record.Breaker); the trial calls in flight are not: after a
// crash no attempt runs. The arithmetic is retry.Breaker's; time is c.now.

type breakerGate struct {
	cfg   retry.Breaker
	c     retry.Circuit
	dirty bool
	// trials counts the trial calls in flight (half-open).
	trials int
}

func newBreakerGate(cfg retry.Breaker, rec *record.Breaker) *breakerGate {
	g := &breakerGate{cfg: cfg, c: retry.Circuit{State: retry.CircuitClosed}}
	if rec != nil {
		g.c = retry.Circuit{
			State:          retry.CircuitState(rec.State),
			Since:          rec.Since,
			HalfOpenAt:     rec.HalfOpenAt,
			Buckets:        bucketsFromRecord(rec.Window),
			TrialSuccesses: rec.TrialSuccesses,
			Epoch:          rec.Epoch,
		}
	}
	return g
}

func (g *breakerGate) timerKind() record.TimerKind { return record.TimerCircuit }

// advance moves an open breaker whose break is over to half-open.
func (g *breakerGate) advance(c *Core) {
	if !g.cfg.Due(&g.c, c.now) {
		return
	}
	next, changed := g.cfg.At(g.c, c.now)
	if !changed {
		return
	}
	g.c, g.trials, g.dirty = next, 0, true
	c.emit(g.event(c, event.CircuitHalfOpen, 0, 0))
}

func (g *breakerGate) ask(c *Core, a *act, opts askOpts) verdict {
	g.advance(c)
	ok, wait := g.cfg.Permit(g.c, c.now, g.trials)
	if ok {
		if g.c.State == retry.CircuitHalfOpen {
			g.trials++
		}
		return verdict{kind: goNow, ticket: g.c.Epoch}
	}
	if opts.failFast {
		return verdict{kind: never, reason: event.ReasonCircuitOpen, err: record.Error{Type: TypeCircuitOpen, Message: g.refusal(c)}}
	}
	return verdict{kind: waitUntil, at: wait}
}

// TypeCircuitOpen is the error type of an activity refused by an open
// breaker whose policy says on_open = "fail".
const TypeCircuitOpen = "circuit_open"

func (g *breakerGate) refusal(c *Core) string {
	if g.c.State == retry.CircuitHalfOpen {
		return fmt.Sprintf("circuit breaker %s is half-open and its %d trial %s running; the policy says on_open = \"fail\"",
			g.cfg.Name, g.trials, plural(g.trials, "call is", "calls are"))
	}
	return fmt.Sprintf("circuit breaker %s is open since %s and lets a trial call through in %s; the policy says on_open = \"fail\"",
		g.cfg.Name, g.c.Since.UTC().Format(time.RFC3339), g.c.HalfOpenAt.Sub(c.now).Round(time.Millisecond))
}

// cancel frees the trial slot of a pass that was not used.
func (g *breakerGate) cancel(c *Core, _ *act, ticket int) {
	if g.c.State == retry.CircuitHalfOpen && ticket == g.c.Epoch && g.trials > 0 {
		g.trials--
		c.wakeParked(g)
	}
}

// done counts the outcome of an attempt the breaker let through in the
// epoch of ticket. A transition is told to the views and lets the
// activities waiting for a trial slot ask again.
func (g *breakerGate) done(c *Core, _ *act, ticket int, end attemptEnd) {
	g.advance(c)
	o := retry.OutcomeSuccess
	switch {
	case end.interrupted:
		o = retry.OutcomeIgnored
	case end.failure != nil:
		o = g.cfg.Classify(end.failure.Type)
	}
	trial := g.c.State == retry.CircuitHalfOpen && ticket == g.c.Epoch
	if trial && g.trials > 0 {
		g.trials--
	}
	if ticket != g.c.Epoch || o == retry.OutcomeIgnored {
		if trial {
			c.wakeParked(g) // its slot is free again
		}
		return
	}
	prev := g.c.State
	g.c = g.cfg.Record(g.c, ticket, o, c.now)
	g.dirty = true
	if g.c.State == prev {
		return
	}
	switch g.c.State {
	case retry.CircuitOpen:
		calls, failures := 1, 1 // a trial that failed, or the window that opened it
		if prev == retry.CircuitClosed {
			calls, failures = g.c.OpenedBy.Calls, g.c.OpenedBy.Failures
		}
		c.emit(g.event(c, event.CircuitOpened, calls, failures))
	case retry.CircuitClosed:
		g.trials = 0
		c.emit(g.event(c, event.CircuitClosed, 0, 0))
	}
	c.wakeParked(g)
}

func (g *breakerGate) waitEvent(c *Core, a *act, v verdict) event.Event {
	ev := c.ev(a, event.CircuitWait)
	ev.Attempt = a.rec.Timer.Attempt
	ev.Breaker = g.cfg.Name
	ev.Circuit = g.info(c, 0, 0)
	ev.DelaySource = event.SourceCircuit
	if !v.at.IsZero() {
		ev.FireAt = timePtr(v.at)
		ev.DelayMs = event.Ms(v.at.Sub(c.now))
	}
	return ev
}

// event is a circuit_* transition event; calls and failures are the
// window that opened it (circuit_opened), else the current window.
func (g *breakerGate) event(c *Core, t event.Type, calls, failures int) event.Event {
	return event.Event{Time: c.now, Type: t, Breaker: g.cfg.Name, Circuit: g.info(c, calls, failures)}
}

// info is the breaker's state for the views; calls and failures are
// filled from the window when both are zero.
func (g *breakerGate) info(c *Core, calls, failures int) *event.CircuitInfo {
	if calls == 0 && failures == 0 {
		calls, failures = g.cfg.Calls(g.c, c.now)
	}
	in := &event.CircuitInfo{
		Name:          g.cfg.Name,
		State:         string(g.c.State),
		Calls:         calls,
		Failures:      failures,
		FailureRatio:  g.cfg.FailureRatio,
		MinimumCalls:  g.cfg.MinimumCalls,
		WindowMs:      g.cfg.Window.Milliseconds(),
		BreakMs:       g.cfg.BreakDuration.Milliseconds(),
		HalfOpenCalls: g.cfg.HalfOpenCalls,
	}
	if g.c.State == retry.CircuitOpen {
		in.HalfOpenAt = timePtr(g.c.HalfOpenAt)
	}
	return in
}

// recordBuf holds a breaker record and, when it is short, its window in
// one allocation: a closed breaker is committed with every step that has
// an outcome of an attempt behind it.
type recordBuf struct {
	rec record.Breaker
	win [4]record.BreakerBucket
}

func (g *breakerGate) record() *record.Breaker {
	buf := &recordBuf{rec: record.Breaker{
		Name:           g.cfg.Name,
		State:          string(g.c.State),
		Since:          g.c.Since,
		HalfOpenAt:     g.c.HalfOpenAt,
		TrialSuccesses: g.c.TrialSuccesses,
		Epoch:          g.c.Epoch,
	}}
	if n := len(g.c.Buckets); n > 0 {
		win := buf.win[:0]
		if n > len(buf.win) {
			win = make([]record.BreakerBucket, 0, n)
		}
		for _, b := range g.c.Buckets {
			win = append(win, record.BreakerBucket{Start: b.Start, Successes: b.Successes, Failures: b.Failures})
		}
		buf.rec.Window = win
	}
	return &buf.rec
}

// tickBreakers moves the breakers whose break is over to half-open, so
// that the views hear of it on time even when no attempt waits for one.
func (c *Core) tickBreakers() {
	for _, g := range c.breakerList {
		g.advance(c)
	}
}

// nextBreakerWake is the earliest end of a break, zero if none is open.
func (c *Core) nextBreakerWake() time.Time {
	var at time.Time
	for _, g := range c.breakerList {
		if g.c.State == retry.CircuitOpen && (at.IsZero() || g.c.HalfOpenAt.Before(at)) {
			at = g.c.HalfOpenAt
		}
	}
	return at
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

func bucketsFromRecord(in []record.BreakerBucket) []retry.Bucket {
	if len(in) == 0 {
		return nil
	}
	out := make([]retry.Bucket, len(in))
	for i, b := range in {
		out[i] = retry.Bucket{Start: b.Start, Successes: b.Successes, Failures: b.Failures}
	}
	return out
}

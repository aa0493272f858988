package core

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/wf-engine/wf/executor/event"
	"github.com/wf-engine/wf/statefile/record"
)

// ---- start-up -----------------------------------------------------------

// slab hands out the nodes and record copies New makes, cut from a few
// large arrays: a state of 100,000 activities is then a handful of
// allocations instead of half a million, which is most of what start-up
// spent (in the allocator and the collector). Elements expanded later,
// and anything past the counts, are allocated one by one.
type slab struct {
	acts   int // how many nodes New will make at most
	nodes  []act
	recs   []record.Activity
	timers []record.Timer
	errs   []record.Error
	counts []int
}

func newSlab(opts Options) slab {
	s := slab{}
	var recs, timers, errs, counts int
	for _, spec := range opts.Instances {
		if spec.Workflow == nil {
			continue
		}
		s.acts += len(spec.Workflow.Activities)
		if opts.OwnActivities {
			continue // kept, not copied (a moved record is copied one by one)
		}
		for _, r := range opts.Activities[spec.Workflow.Address()] {
			recs++
			if r.Timer != nil {
				timers++
			}
			if r.LastError != nil {
				errs++
			}
			counts += len(r.RuleCounts)
		}
	}
	s.nodes = make([]act, s.acts)
	s.recs = make([]record.Activity, recs)
	s.timers = make([]record.Timer, timers)
	s.errs = make([]record.Error, errs)
	s.counts = make([]int, counts)
	return s
}

// act returns a zero node.
func (s *slab) act() *act {
	if len(s.nodes) == 0 {
		return new(act)
	}
	a := &s.nodes[0]
	s.nodes = s.nodes[1:]
	return a
}

// copy is copyActivity into the slab.
func (s *slab) copy(r *record.Activity) *record.Activity {
	if len(s.recs) == 0 {
		cp := copyActivity(r)
		return &cp
	}
	cp := &s.recs[0]
	s.recs = s.recs[1:]
	*cp = *r
	if r.Timer != nil {
		if len(s.timers) > 0 {
			cp.Timer, s.timers = &s.timers[0], s.timers[1:]
		} else {
			cp.Timer = new(record.Timer)
		}
		*cp.Timer = *r.Timer
	}
	if r.LastError != nil {
		if len(s.errs) > 0 {
			cp.LastError, s.errs = &s.errs[0], s.errs[1:]
		} else {
			cp.LastError = new(record.Error)
		}
		*cp.LastError = *r.LastError
	}
	// As copyActivity: no counts (nil or empty) copy as nil.
	if len(r.RuleCounts) > 0 {
		if n := len(r.RuleCounts); n <= len(s.counts) {
			// Full slice expression: an append by the core reallocates
			// rather than write into the next record's counts.
			cp.RuleCounts, s.counts = s.counts[:n:n], s.counts[n:]
			copy(cp.RuleCounts, r.RuleCounts)
		} else {
			cp.RuleCounts = append([]int(nil), r.RuleCounts...)
		}
	} else {
		cp.RuleCounts = nil
	}
	return cp
}

// refs gives every activity its "activity.NAME", all cut from one
// string: every event of an activity names it, and a state of 100,000
// activities would otherwise build 100,000 such strings per kind of event.
func (c *Core) refs() {
	n := 0
	for _, a := range c.all {
		n += len("activity.") + len(a.cfg.Name)
	}
	var b strings.Builder
	b.Grow(n)
	for _, a := range c.all {
		b.WriteString("activity.")
		b.WriteString(a.cfg.Name)
	}
	all, at := b.String(), 0
	for _, a := range c.all {
		end := at + len("activity.") + len(a.cfg.Name)
		a.ref = all[at:end]
		at = end
	}
}

// address is the activity's "activity.NAME".
func (a *act) address() string {
	if a.ref != "" {
		return a.ref
	}
	return "activity." + a.cfg.Name
}

// growStartEvents sizes the first step's events for what start-up is
// known to emit (a plan per instance, a timer_recovered per recorded
// timer, the first attempts) and the timer heap for the recorded timers.
// Recovering 100,000 timers otherwise grows a slice of large events a
// score of times.
func (c *Core) growStartEvents() {
	timers := 0
	for _, a := range c.all {
		if a.rec != nil && a.rec.Timer != nil {
			timers++
		}
	}
	fresh := c.out.Events == nil
	c.out.Events = slices.Grow(c.out.Events, timers+2*len(c.insts)+max(c.opts.Parallelism, 0))
	c.timers = slices.Grow(c.timers, timers)
	c.recoveredFacts = timerFacts{at: make([]time.Time, timers), ms: make([]int64, timers), rules: make([]event.RuleRef, timers),
		// A new array is zero past its length, and events are only
		// ever appended within a step.
		zeroTail: fresh}
}

// timerFacts holds the fire times, delays and rule references the
// timer_recovered events of start-up point to, three arrays rather than
// three allocations per event.
type timerFacts struct {
	at    []time.Time
	ms    []int64
	rules []event.RuleRef
	// zeroTail: the step's events were allocated by growStartEvents, so
	// the slots past their length are still zero.
	zeroTail bool
}

// rule is the activity's rule reference, in the next slot of the array.
func (f *timerFacts) rule(a *act) *event.RuleRef {
	if len(f.rules) == 0 {
		return a.ruleRef()
	}
	ref := a.ruleRefIn(&f.rules[0])
	if ref != nil {
		f.rules = f.rules[1:]
	}
	return ref
}

// emitRecovered emits the timer_recovered event of a recorded timer,
// built in place in the step's events (presized by growStartEvents):
// 100,000 of them at start-up, each 400-odd bytes, are then not built
// and copied again.
func (c *Core) emitRecovered(a *act, t *record.Timer) {
	n := len(c.out.Events)
	if c.recoveredFacts.zeroTail && n < cap(c.out.Events) {
		// Not append(..., event.Event{}): that writes 432 zero bytes
		// over zero bytes, with a write barrier while the collector runs.
		c.out.Events = c.out.Events[:n+1]
	} else {
		c.out.Events = append(c.out.Events, event.Event{})
	}
	ev := &c.out.Events[n]
	c.fillEv(ev, a, event.TimerRecovered, c.recoveredFacts.rule(a))
	ev.Attempt = t.Attempt
	ev.FireAt, ev.DelayMs = c.recoveredFacts.next(t)
	ev.DelaySource = t.Source
}

func (f *timerFacts) next(t *record.Timer) (*time.Time, *int64) {
	if len(f.at) == 0 || len(f.ms) == 0 {
		return timePtr(t.FireAt), event.Ms(t.Delay)
	}
	at, ms := &f.at[0], &f.ms[0]
	f.at, f.ms = f.at[1:], f.ms[1:]
	*at, *ms = t.FireAt, t.Delay.Milliseconds()
	return at, ms
}

func (c *Core) initInstance(in *inst) {
	if r := c.opts.InstanceState[in.addr]; r != nil {
		cp := *r
		in.rec = &cp
	} else {
		in.rec = &record.Instance{Workflow: in.wf.Name, Key: in.wf.Key, Created: c.now}
	}
	in.rec.Updated = c.now
	c.instDirty = append(c.instDirty, in)

	plan := event.Event{Time: c.now, Type: event.Plan, Workflow: in.wf.Name, Instance: in.addr}
	plan.Activities = c.planInfos(in.acts)
	// The breakers its activities are behind, so that the views show
	// them from the start.
	for _, g := range c.breakerList {
		for _, a := range in.acts {
			if slices.ContainsFunc(a.starts, func(u gateUse) bool { return u.g == gate(g) }) {
				plan.Circuits = append(plan.Circuits, *g.info(c, 0, 0))
				break
			}
		}
	}
	c.emit(plan)

	for _, a := range in.acts {
		if a.grp == nil {
			c.initActivity(a)
		}
	}
}

func (c *Core) initActivity(a *act) {
	mode := a.mode
	if mode == ModeResume && (a.rec == nil || a.rec.Generation == 0 || a.rec.Status == record.StatusSkipped) {
		mode = ModeFresh
	}
	switch mode {
	case ModeSkip:
		a.phase = phaseDone
		if a.rec == nil {
			a.rec = c.newRecord(a, 0)
		}
	case ModeFresh:
		gen := 1
		if a.rec != nil {
			gen = a.rec.Generation + 1
			c.closeStale(a)
		}
		a.rec = c.newRecord(a, gen)
		a.phase = phaseBlocked
		c.markAct(a)
	case ModeResume:
		switch a.rec.Status {
		case record.StatusSucceeded, record.StatusFailed:
			a.phase = phaseDone
		case record.StatusWaiting:
			if t := a.rec.Timer; t != nil {
				c.emitRecovered(a, t)
				c.armTimer(a)
				return
			}
			a.phase = phaseBlocked
		case record.StatusRunning:
			// Handled by recover once every activity has a phase.
			a.phase = phaseRunning
		default:
			a.phase = phaseBlocked
		}
	}
}

func (c *Core) newRecord(a *act, gen int) *record.Activity {
	r := &record.Activity{
		Workflow:   a.in.wf.Name,
		Instance:   a.in.wf.Key,
		Name:       a.cfg.Name,
		Generation: gen,
		Status:     record.StatusPending,
	}
	if gen > 0 {
		r.IdempotencyKey = IdempotencyKey(KeyInput{
			StateID:         c.opts.StateID,
			Workflow:        r.Workflow,
			Instance:        r.Instance,
			Activity:        r.Name,
			InstanceCreated: a.in.rec.Created,
			Generation:      gen,
		})
	}
	return r
}

// closeStale records as interrupted the attempt of an old generation that
// was running when the engine stopped, when the activity starts a new
// generation instead of resuming (its definition changed meanwhile), so
// that the attempt log never keeps an attempt "running" forever.
func (c *Core) closeStale(a *act) {
	r := a.rec
	if r.Status != record.StatusRunning {
		return
	}
	prev := c.opts.Running[a.in.addr][r.Name]
	if prev == nil || prev.Generation != r.Generation || prev.Outcome != record.OutcomeRunning {
		return
	}
	att := *prev
	att.End = c.now
	att.Outcome = record.OutcomeInterrupted
	att.Error = &record.Error{Type: "interrupted", Message: "the engine stopped while the attempt was running; the activity then started over (its definition changed)"}
	c.markAtt(&att)
}

// recover handles an attempt that was running when the engine stopped: it
// is recorded as interrupted and the next attempt starts at once, unless
// the shell found its processes still alive (the activity is then held).
func (c *Core) recover(a *act) {
	if a.phase != phaseRunning || a.cur != nil {
		return
	}
	r := a.rec
	n := max(r.Attempts, 1)
	if o, ok := c.opts.Orphans[a.in.addr][r.Name]; ok {
		if len(o.Survivors) > 0 || o.Err != "" {
			a.phase = phaseHeld
			ev := c.ev(a, event.OrphanAlive)
			ev.Attempt = n
			ev.ProcessGroup = o.ProcessGroup
			ev.PIDs = slices.Clone(o.Survivors)
			msg := o.Err
			if msg == "" {
				msg = fmt.Sprintf("attempt %d, left running by a previous wf, is still alive after SIGKILL (%s); its next attempt is not started so that two attempts never run at once: end %s and run wf apply again",
					n, pidList(o.Survivors), itThem(len(o.Survivors)))
			}
			ev.Error = &event.Error{Type: "orphan_alive", Message: msg}
			c.emit(ev)
			return
		}
		if o.ProcessGroup != 0 || len(o.Killed) > 0 {
			ev := c.ev(a, event.OrphanEnded)
			ev.Attempt = n
			ev.ProcessGroup = o.ProcessGroup
			ev.PIDs = slices.Clone(o.Killed)
			c.emit(ev)
		}
	}
	if prev := c.opts.Running[a.in.addr][r.Name]; prev != nil && prev.Generation == r.Generation && prev.Number == n {
		cp := *prev
		a.cur = &cp
	} else {
		start := c.now
		if n == 1 && !r.FirstStart.IsZero() {
			start = r.FirstStart
		}
		a.cur = &record.Attempt{
			Workflow:       r.Workflow,
			Instance:       r.Instance,
			Activity:       r.Name,
			Generation:     r.Generation,
			Number:         n,
			IdempotencyKey: r.IdempotencyKey,
			Start:          start,
			Outcome:        record.OutcomeRunning,
		}
	}
	// Not counted in c.running: nothing is in flight in this process.
	c.interrupted(a, "the engine stopped while the attempt was running", c.now)
}

func pidList(pids []int) string {
	parts := make([]string, len(pids))
	for i, p := range pids {
		parts[i] = strconv.Itoa(p)
	}
	if len(pids) == 1 {
		return "PID " + parts[0]
	}
	return "PIDs " + strings.Join(parts, ", ")
}

func itThem(n int) string {
	if n == 1 {
		return "it"
	}
	return "them"
}

// unblock decides what a blocked activity does given its upstreams.

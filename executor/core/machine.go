package core

import (
	"container/heap"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/wf-engine/wf/config"
	"github.com/wf-engine/wf/executor/event"
	"github.com/wf-engine/wf/retry"
	"github.com/wf-engine/wf/statefile/record"
)

// phase is where an activity is in this run; the durable truth is its
// record, the phase only says which in-memory structure holds it.
type phase int

const (
	phaseBlocked phase = iota // waiting for upstream activities
	phaseQueued               // may start, waiting for a free slot
	phaseRunning              // an exec/http attempt is in flight
	phaseTimer                // a retry, budget or sleep timer is armed
	phaseDone                 // terminal, or not part of this run
	// phaseHeld: an attempt a previous run left running still has live
	// processes; nothing of the activity (or downstream) runs this time.
	phaseHeld
)

type inst struct {
	wf   *config.Workflow
	addr string
	acts []*act // topological order, ties broken by declaration order
	rec  *record.Instance
}

type act struct {
	in     *inst
	cfg    *config.Activity
	mode   Mode
	action string // plan action word
	order  int    // global position: instance order, then topological order
	rec    *record.Activity
	phase  phase
	// next and firedBy describe the attempt to start once queued.
	next    int
	firedBy string
	cur     *record.Attempt // the attempt in flight or sleeping
	up      []*act
	down    []*act
	unmet   int
	heapIdx int
	qIdx    int
	dirty   bool
	budget  string // the budget shown on this activity's events
	// rule is the retry rule that decided the last failure (-1: none yet);
	// its maximum_attempts is the limit the next attempts are counted
	// against, so a 429 rule allowing 10 shows "attempt k/10".
	rule int
}

type budgetState struct {
	cfg   retry.Budget
	rec   *record.Budget
	dirty bool
	high  bool // budget_high was emitted and usage has not fallen below 80 % since
	// used is what the gate last said the window holds (with a gate).
	used int
}

// Core is the executor's deterministic state machine. It is not safe for
// concurrent use: one goroutine (the shell's loop) owns it.
type Core struct {
	opts    Options
	resolve func(*config.Activity, map[string]cty.Value) (*config.Resolved, hcl.Diagnostics)
	insts   []*inst
	byAddr  map[string]*inst
	all     []*act
	budgets map[string]*budgetState
	// budgetOrder keeps budget persistence in a stable order.
	budgetOrder []string

	timers  timerHeap
	queue   readyQueue
	running int

	started  bool
	stopped  bool
	finished bool
	status   string
	begin    time.Time
	attempts int
	retries  int

	// per-step output
	now       time.Time
	out       Ready
	instDirty []*inst
	dirtyActs []*act
	dirtyAtts []*record.Attempt
	dirtyAtt  map[*record.Attempt]bool
}

// New builds a core over the planned instances and their loaded state.
// Nothing happens until Start.
func New(opts Options) *Core {
	c := &Core{
		opts:     opts,
		resolve:  opts.Resolve,
		byAddr:   map[string]*inst{},
		budgets:  map[string]*budgetState{},
		dirtyAtt: map[*record.Attempt]bool{},
	}
	if c.resolve == nil {
		c.resolve = func(a *config.Activity, up map[string]cty.Value) (*config.Resolved, hcl.Diagnostics) {
			return a.Resolve(up)
		}
	}
	for _, name := range sortedKeys(opts.Budgets) {
		st := &budgetState{cfg: opts.Budgets[name], rec: &record.Budget{Name: name}}
		if r := opts.BudgetState[name]; r != nil {
			st.rec = &record.Budget{Name: name, Stamps: append([]time.Time(nil), r.Stamps...)}
		}
		c.budgets[name] = st
		c.budgetOrder = append(c.budgetOrder, name)
	}
	for _, spec := range opts.Instances {
		if spec.Workflow == nil {
			continue
		}
		in := &inst{wf: spec.Workflow, addr: spec.Workflow.Address()}
		if _, dup := c.byAddr[in.addr]; dup {
			continue
		}
		c.byAddr[in.addr] = in
		c.insts = append(c.insts, in)
		state := opts.Activities[in.addr]
		byName := map[string]*act{}
		for _, ac := range topoOrder(spec.Workflow.Activities) {
			a := &act{in: in, cfg: ac, order: len(c.all), heapIdx: -1, qIdx: -1, rule: -1}
			if r := state[ac.Name]; r != nil {
				cp := copyActivity(r)
				a.rec = &cp
			}
			a.mode = modeFor(spec.Modes, ac.Name, a.rec)
			a.action = actionFor(a.mode, a.rec)
			for _, r := range ac.Rules {
				if r.Policy.Budget != "" {
					a.budget = r.Policy.Budget
					break
				}
			}
			byName[ac.Name] = a
			in.acts = append(in.acts, a)
			c.all = append(c.all, a)
		}
		// in.acts is topological, so every upstream already has its node
		// and downstream lists come out in topological order.
		for _, a := range in.acts {
			for _, name := range a.cfg.DependsOn {
				if u := byName[name]; u != nil && u != a {
					a.up = append(a.up, u)
					u.down = append(u.down, a)
				}
			}
		}
	}
	return c
}

func modeFor(modes map[string]Mode, name string, rec *record.Activity) Mode {
	if m, ok := modes[name]; ok {
		return m
	}
	switch {
	case rec == nil || rec.Generation == 0:
		return ModeFresh
	case rec.Status == record.StatusSucceeded:
		return ModeSkip
	case rec.Status == record.StatusFailed || rec.Status == record.StatusSkipped:
		return ModeFresh
	}
	return ModeResume
}

func actionFor(m Mode, rec *record.Activity) string {
	switch m {
	case ModeSkip:
		return "unchanged"
	case ModeResume:
		return "resume"
	}
	switch {
	case rec == nil || rec.Generation == 0 || rec.Status == record.StatusSkipped:
		return "run"
	case rec.Status == record.StatusFailed:
		return "retry_failed"
	}
	return "rerun"
}

// topoOrder orders activities so that upstreams come first; among the
// activities that are ready at the same time declaration order wins.
// Activities caught in a cycle (the planner rejects those) are appended in
// declaration order; they never become ready.
func topoOrder(acts []*config.Activity) []*config.Activity {
	index := map[string]int{}
	for i, a := range acts {
		index[a.Name] = i
	}
	indeg := make([]int, len(acts))
	down := make([][]int, len(acts))
	for i, a := range acts {
		for _, d := range a.DependsOn {
			if j, ok := index[d]; ok && j != i {
				indeg[i]++
				down[j] = append(down[j], i)
			}
		}
	}
	var ready intHeap
	for i := range acts {
		if indeg[i] == 0 {
			heap.Push(&ready, i)
		}
	}
	out := make([]*config.Activity, 0, len(acts))
	placed := make([]bool, len(acts))
	for ready.Len() > 0 {
		i := heap.Pop(&ready).(int)
		placed[i] = true
		out = append(out, acts[i])
		for _, j := range down[i] {
			indeg[j]--
			if indeg[j] == 0 {
				heap.Push(&ready, j)
			}
		}
	}
	for i, a := range acts {
		if !placed[i] {
			out = append(out, a)
		}
	}
	return out
}

// ---- inputs -------------------------------------------------------------

// Start is the first step: plan events, recovery of the loaded state and
// the first attempts. Calling it twice returns an empty step.
func (c *Core) Start(now time.Time) Ready {
	return c.step(now, func() {
		if c.started {
			return
		}
		c.started = true
		c.begin = now
		for _, in := range c.insts {
			c.initInstance(in)
		}
		// Recovery after every instance is initialised, so that a failure
		// found here can cascade into downstream activities.
		for _, a := range c.all {
			c.recover(a)
		}
		for _, a := range c.all {
			if a.phase != phaseBlocked {
				continue
			}
			c.unblock(a)
		}
		c.fireDue()
	})
}

// AttemptsDone records finished attempts; the shell passes every result
// that is available at once so that they share one commit.
func (c *Core) AttemptsDone(now time.Time, rs []Result) Ready {
	return c.step(now, func() {
		for _, r := range rs {
			c.result(r)
		}
	})
}

// Tick fires every timer due at now.
func (c *Core) Tick(now time.Time) Ready {
	return c.step(now, c.fireDue)
}

// FireNow fires the pending retry (or budget) timer of one activity at
// once, as an operator asked. instance is the address "workflow/key";
// activity is "NAME" or "activity.NAME". Anything else is ignored.
func (c *Core) FireNow(now time.Time, instance, activity string) Ready {
	return c.step(now, func() {
		if c.stopped {
			return
		}
		a := c.find(instance, strings.TrimPrefix(activity, "activity."))
		if a == nil || a.phase != phaseTimer || a.rec.Timer == nil {
			return
		}
		t := a.rec.Timer
		if t.Kind != record.TimerRetry && t.Kind != record.TimerBudget {
			return
		}
		heap.Remove(&c.timers, a.heapIdx)
		if t.Kind == record.TimerBudget {
			// The operator overrides the budget, but the retry still uses it.
			if b := c.budgets[a.budget]; b != nil {
				c.take(a, b, true)
			}
		}
		t.Kind = record.TimerRetry
		t.FireAt = c.now
		t.Set = c.now
		t.Delay = 0
		t.Source = "manual"
		c.markAct(a)
		ev := c.ev(a, event.RetryScheduled)
		ev.Attempt = t.Attempt
		ev.DelayMs = event.Ms(0)
		ev.DelaySource = "manual"
		ev.FireAt = timePtr(c.now)
		c.emit(ev)
		c.enqueue(a, t.Attempt, "manual")
	})
}

// Stop stops starting attempts. Timers stay recorded; results of attempts
// still running are recorded as they arrive. The run is Done (interrupted)
// once nothing runs.
func (c *Core) Stop(now time.Time) Ready {
	return c.step(now, func() {
		c.stopped = true
	})
}

// ---- step machinery -----------------------------------------------------

func (c *Core) step(now time.Time, f func()) Ready {
	if c.finished {
		return Ready{Done: true, Status: c.status}
	}
	c.now = now
	c.out = Ready{}
	f()
	// Whatever the input, a timer due now fires now: an interrupted
	// attempt arms one due at once, and its next attempt must not wait
	// for a wake-up round trip through the shell.
	c.fireDue()
	c.pump()
	c.checkDone()
	c.flush()
	if !c.stopped && c.timers.Len() > 0 {
		c.out.Wake = c.timers[0].rec.Timer.FireAt
	}
	out := c.out
	c.out = Ready{}
	return out
}

// flush turns everything marked dirty during the step into mutations.
func (c *Core) flush() {
	var ms []record.Mutation
	for _, in := range c.instDirty {
		r := *in.rec
		ms = append(ms, record.Mutation{Instance: &r})
	}
	for _, att := range c.dirtyAtts {
		r := *att
		if att.Error != nil {
			e := *att.Error
			r.Error = &e
		}
		ms = append(ms, record.Mutation{Attempt: &r})
	}
	for _, a := range c.dirtyActs {
		r := copyActivity(a.rec)
		ms = append(ms, record.Mutation{Activity: &r})
		a.dirty = false
	}
	for _, name := range c.budgetOrder {
		b := c.budgets[name]
		if b.dirty {
			ms = append(ms, record.Mutation{Budget: &record.Budget{Name: name, Stamps: append([]time.Time(nil), b.rec.Stamps...)}})
			b.dirty = false
		}
	}
	c.instDirty, c.dirtyActs, c.dirtyAtts = nil, nil, nil
	clear(c.dirtyAtt)
	c.out.Persist = append(c.out.Persist, ms...)
}

func (c *Core) markAct(a *act) {
	if !a.dirty {
		a.dirty = true
		c.dirtyActs = append(c.dirtyActs, a)
	}
}

func (c *Core) markAtt(att *record.Attempt) {
	if !c.dirtyAtt[att] {
		c.dirtyAtt[att] = true
		c.dirtyAtts = append(c.dirtyAtts, att)
	}
}

func (c *Core) emit(ev event.Event) { c.out.Events = append(c.out.Events, ev) }

func (c *Core) find(addr, name string) *act {
	in := c.byAddr[addr]
	if in == nil {
		return nil
	}
	for _, a := range in.acts {
		if a.cfg.Name == name {
			return a
		}
	}
	return nil
}

// ---- start-up -----------------------------------------------------------

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
	for _, a := range in.acts {
		info := event.ActivityInfo{
			Activity:    "activity." + a.cfg.Name,
			Kind:        string(a.cfg.Kind),
			Action:      a.action,
			MaxAttempts: maxAttempts(a.cfg),
		}
		for _, u := range a.up {
			info.DependsOn = append(info.DependsOn, "activity."+u.cfg.Name)
		}
		if a.mode == ModeResume && a.rec != nil {
			info.Attempts = a.rec.Attempts
		}
		plan.Activities = append(plan.Activities, info)
	}
	c.emit(plan)

	for _, a := range in.acts {
		c.initActivity(a)
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
				ev := c.ev(a, event.TimerRecovered)
				ev.Attempt = t.Attempt
				ev.FireAt = timePtr(t.FireAt)
				ev.DelayMs = event.Ms(t.Delay)
				ev.DelaySource = t.Source
				c.emit(ev)
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
		c.startAttempt(a)
	}
}

func (c *Core) startAttempt(a *act) {
	upstream := make(map[string]cty.Value, len(a.up))
	for _, u := range a.up {
		v, err := config.OutputsValue(u.rec.Outputs)
		if err != nil {
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
	})
}

func (c *Core) result(res Result) {
	a := c.find(res.Workflow+"/"+res.Instance, res.Activity)
	if a == nil || a.phase != phaseRunning || a.cur == nil || a.cur.Number != res.Number {
		// Stale or unknown: nothing in flight matches it.
		return
	}
	c.running--
	// The attempt's events carry the tail of what it printed (the
	// dashboard's l view, for wf apply and wf watch alike), and so does its
	// record (wf history -output).
	out := attemptOutput(res)
	a.cur.Output = recordOutput(out)
	defer c.attachOutput(len(c.out.Events), res.Activity, res.Number, out)
	end := res.End
	if end.IsZero() {
		end = c.now
	}
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
	outputs := res.Outputs
	if len(outputs) == 0 {
		outputs = json.RawMessage(`{}`)
	}
	c.succeed(a, outputs, end)
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
	var b *budgetState
	if dec.Rule >= 0 && dec.Rule < len(a.cfg.Rules) {
		if name := a.cfg.Rules[dec.Rule].Policy.Budget; name != "" {
			b = c.budgets[name]
			a.budget = name
		}
	}
	next := att.Number + 1
	if b == nil {
		c.emit(failed)
		c.armRetry(a, att, next, dec)
		return
	}
	ok, nextFree := c.take(a, b, false)
	switch {
	case ok:
		failed.Budget = c.usage(a)
		c.emit(failed)
		c.armRetry(a, att, next, dec)
	case b.cfg.OnExhausted == "fail" || nextFree.IsZero():
		// A budget that never frees (max_retries 0) cannot be waited for.
		c.emit(failed)
		c.failBudget(a, b)
	default:
		c.emit(failed)
		fireAt := nextFree
		wait := max(fireAt.Sub(c.now), dec.Delay)
		att.Wait, att.HasWait, att.WaitSource = wait, true, "budget"
		r.LastDelay = dec.Delay
		r.Status = record.StatusWaiting
		r.Timer = &record.Timer{Kind: record.TimerBudget, FireAt: fireAt, Attempt: next, Set: c.now, Delay: dec.Delay, Source: "budget"}
		c.markAct(a)
		c.armTimer(a)
		c.emitBudgetWait(a)
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

func (c *Core) failBudget(a *act, b *budgetState) {
	c.fail(a, event.ReasonBudgetExhausted, record.Error{
		Type:    "budget_exhausted",
		Message: fmt.Sprintf("retry budget %s exhausted: %d of %d retries used in the last %s", b.rec.Name, c.used(b), b.cfg.MaxRetries, b.cfg.Window),
	})
}

func (c *Core) emitBudgetWait(a *act) {
	t := a.rec.Timer
	ev := c.ev(a, event.BudgetWait)
	ev.Attempt = t.Attempt
	ev.FireAt = timePtr(t.FireAt)
	ev.DelayMs = event.Ms(t.FireAt.Sub(c.now))
	ev.DelaySource = "budget"
	c.emit(ev)
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

// ---- timers -------------------------------------------------------------

func (c *Core) armTimer(a *act) {
	a.phase = phaseTimer
	heap.Push(&c.timers, a)
}

// fireDue fires every timer due at c.now, earliest first.
func (c *Core) fireDue() {
	if c.stopped {
		return
	}
	for c.timers.Len() > 0 && !c.timers[0].rec.Timer.FireAt.After(c.now) {
		a := heap.Pop(&c.timers).(*act)
		c.fire(a)
	}
}

func (c *Core) fire(a *act) {
	t := a.rec.Timer
	switch t.Kind {
	case record.TimerSleep:
		if a.cur == nil {
			// Restarted mid-sleep: the attempt record began when the
			// timer was set.
			r := a.rec
			a.cur = &record.Attempt{
				Workflow: r.Workflow, Instance: r.Instance, Activity: r.Name,
				Generation: r.Generation, Number: t.Attempt, IdempotencyKey: r.IdempotencyKey,
				Start: t.Set, Outcome: record.OutcomeRunning,
			}
		}
		c.succeed(a, json.RawMessage(`{}`), c.now)
	case record.TimerBudget:
		b := c.budgets[a.budget]
		if b != nil {
			ok, nextFree := c.take(a, b, false)
			if !ok && nextFree.IsZero() {
				c.failBudget(a, b)
				return
			}
			if !ok {
				t.FireAt = nextFree
				c.markAct(a)
				c.armTimer(a)
				c.emitBudgetWait(a)
				return
			}
		}
		if due := t.Set.Add(t.Delay); due.After(c.now) {
			t.Kind = record.TimerRetry
			t.FireAt = due
			c.markAct(a)
			c.armTimer(a)
			ev := c.ev(a, event.RetryScheduled)
			ev.Attempt = t.Attempt
			ev.DelayMs = event.Ms(due.Sub(c.now))
			ev.DelaySource = t.Source
			ev.FireAt = timePtr(due)
			c.emit(ev)
			return
		}
		c.enqueue(a, t.Attempt, "")
	default:
		c.enqueue(a, t.Attempt, "")
	}
}

// ---- budgets ------------------------------------------------------------

// take asks for one retry token: from the gate when there is one (the
// cluster-wide budgets of the Temporal engine), else from the budget's own
// window. force takes it even from a full window (an operator's retry). A
// grant that lifts usage to 80 % or more emits budget_high, once per
// crossing.
func (c *Core) take(a *act, b *budgetState, force bool) (ok bool, nextFree time.Time) {
	var before int // retries in the window just before this grant
	if g := c.opts.BudgetGate; g != nil {
		if ok, nextFree, b.used = g.Take(b.rec.Name, c.now, force); !ok {
			return false, nextFree
		}
		before = b.used - 1
	} else {
		if !force {
			if ok, nextFree = b.cfg.Allow(b.rec.Stamps, c.now); !ok {
				return false, nextFree
			}
		}
		live := b.cfg.Prune(b.rec.Stamps, c.now)
		before = len(live)
		b.rec.Stamps = append(live, c.now)
		b.dirty = true
	}
	high := func(used int) bool { return used*100 >= b.cfg.MaxRetries*80 }
	// Usage only rises with a grant, so it fell below 80 % since the last
	// warning iff it is below just before this one.
	b.high = b.high && high(before)
	if !b.high && high(c.used(b)) {
		b.high = true
		c.emit(c.ev(a, event.BudgetHigh))
	}
	return true, time.Time{}
}

// used is how many retries the budget's window holds.
func (c *Core) used(b *budgetState) int {
	if c.opts.BudgetGate != nil {
		return b.used
	}
	return b.cfg.Used(b.rec.Stamps, c.now)
}

func (c *Core) usage(a *act) *event.BudgetUsage {
	b := c.budgets[a.budget]
	if b == nil {
		return nil
	}
	return &event.BudgetUsage{
		Name:       b.cfg.Name,
		Used:       c.used(b),
		MaxRetries: b.cfg.MaxRetries,
		WindowMs:   b.cfg.Window.Milliseconds(),
		// stamp replaces the slice and never writes into it: safe to share.
		Stamps: b.rec.Stamps[:len(b.rec.Stamps):len(b.rec.Stamps)],
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

// ---- helpers ------------------------------------------------------------

func (c *Core) ev(a *act, t event.Type) event.Event {
	ev := event.Event{
		Time:        c.now,
		Type:        t,
		Workflow:    a.in.wf.Name,
		Instance:    a.in.addr,
		Activity:    "activity." + a.cfg.Name,
		Kind:        string(a.cfg.Kind),
		MaxAttempts: a.maxAttempts(),
		Rule:        a.ruleRef(),
		Budget:      c.usage(a),
	}
	if a.rec != nil {
		ev.Interrupted = a.rec.Interrupted
	}
	return ev
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
func (a *act) ruleRef() *event.RuleRef {
	if len(a.cfg.Rules) == 0 || a.rec == nil {
		return nil
	}
	ref := &event.RuleRef{Rules: len(a.cfg.Rules)}
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

// ---- heaps --------------------------------------------------------------

// timerHeap orders armed timers by fire time, then by activity order, so
// timers due together fire in a deterministic order.
type timerHeap []*act

func (h timerHeap) Len() int { return len(h) }
func (h timerHeap) Less(i, j int) bool {
	ti, tj := h[i].rec.Timer.FireAt, h[j].rec.Timer.FireAt
	if !ti.Equal(tj) {
		return ti.Before(tj)
	}
	return h[i].order < h[j].order
}
func (h timerHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].heapIdx = i
	h[j].heapIdx = j
}
func (h *timerHeap) Push(x any) {
	a := x.(*act)
	a.heapIdx = len(*h)
	*h = append(*h, a)
}
func (h *timerHeap) Pop() any {
	old := *h
	a := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	a.heapIdx = -1
	return a
}

// readyQueue orders activities waiting for a slot by activity order.
type readyQueue []*act

func (q readyQueue) Len() int           { return len(q) }
func (q readyQueue) Less(i, j int) bool { return q[i].order < q[j].order }
func (q readyQueue) Swap(i, j int) {
	q[i], q[j] = q[j], q[i]
	q[i].qIdx = i
	q[j].qIdx = j
}
func (q *readyQueue) Push(x any) {
	a := x.(*act)
	a.qIdx = len(*q)
	*q = append(*q, a)
}
func (q *readyQueue) Pop() any {
	old := *q
	a := old[len(old)-1]
	old[len(old)-1] = nil
	*q = old[:len(old)-1]
	a.qIdx = -1
	return a
}

type intHeap []int

func (h intHeap) Len() int           { return len(h) }
func (h intHeap) Less(i, j int) bool { return h[i] < h[j] }
func (h intHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *intHeap) Push(x any)        { *h = append(*h, x.(int)) }
func (h *intHeap) Pop() any {
	old := *h
	v := old[len(old)-1]
	*h = old[:len(old)-1]
	return v
}

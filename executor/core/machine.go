package core

import (
	"container/heap"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/wf-engine/wf/config"
	"github.com/wf-engine/wf/executor/event"
	"github.com/wf-engine/wf/statefile/record"
)

// phase is where an activity is in this run; the durable truth is its
// record, the phase only says which in-memory structure holds it.
type phase int

const (
	phaseBlocked phase = iota // waiting for upstream activities
	phaseQueued               // may start, waiting for a free slot
	phaseRunning              // an exec/http attempt is in flight
	phaseTimer                // a retry, budget, circuit or sleep timer is armed
	phaseDone                 // terminal, or not part of this run
	// phaseHeld: an attempt a previous run left running still has live
	// processes; nothing of the activity (or downstream) runs this time.
	phaseHeld
	// phaseGate: waiting for a gate to change (a breaker's trial call to
	// end), on the gate's list rather than the timer heap.
	phaseGate
)

type inst struct {
	wf   *config.Workflow
	addr string
	acts []*act // topological order, ties broken by declaration order
	rec  *record.Instance
	// More of the instance (expand.go): its nodes by name, its stored
	// records as the configuration names them, its outputs.
	instExt
}

type act struct {
	in     *inst
	cfg    *config.Activity
	mode   Mode
	action string // plan action word
	// ref is "activity.NAME", cut from one string built for every
	// activity known at New (refs); "" for elements expanded later.
	ref   string
	order int // global position: instance order, then topological order
	rec   *record.Activity
	phase phase
	// next and firedBy describe the attempt to start once queued.
	next    int
	firedBy string
	cur     *record.Attempt // the attempt in flight or sleeping
	up      []*act
	down    []*act
	heapIdx int
	qIdx    int
	dirty   bool
	// timerWritten is whether the store's timer index has an entry of
	// the activity, so that a write without a timer can tell the store
	// there is none to delete (record.Mutation.NoTimerBefore).
	timerWritten timerWritten
	budget       string // the budget shown on this activity's events
	// rule is the retry rule that decided the last failure (-1: none yet);
	// its maximum_attempts is the limit the next attempts are counted
	// against, so a 429 rule allowing 10 shows "attempt k/10".
	rule int
	// starts are the gates every attempt must pass before it starts (its
	// circuit breakers); tickets the passes of the attempt in flight,
	// held while admitted.
	starts   []gateUse
	tickets  []int
	admitted bool
	// late holds what only some nodes come to need (nil until then):
	// kept out of the node, which New makes for every activity (100,000
	// nodes at recovery: 112 fewer bytes each to allocate and clear).
	late *actLate
	// What the language adds (for_each groups, trigger rules, cached
	// upstream values, redaction): expand.go, trigger.go, redact.go.
	actExt
}

// timerWritten is what the store's timer index holds of an activity, as
// the core knows it: first what the record it loaded says (the index
// matches the records when a store opens; a record the store does not
// have has no entry), then what its last write of the record said. Its
// writes are committed in the order it made them, so the index entry
// exists exactly when the last record written has a timer. A record
// deleted meanwhile (DeleteActivity) takes its entry with it, which
// leaves "none" true; a moved record (RenameActivity, at Start, before
// any node is made) moves its entry with it.
type timerWritten uint8

const (
	timerUnknown timerWritten = iota
	timerNone
	timerSet
)

// actLate is the part of a node that only running attempts with
// heartbeats and upstream values read by expressions use.
type actLate struct {
	// beatShown and detailsSaved rate-limit heartbeat events and the
	// commits of heartbeat details (heartbeat.go).
	beatShown, detailsSaved time.Time
	// val and cval cache what downstream expressions see of the node
	// once it has ended (upstreamValue).
	val, cval cty.Value
}

// lateFields returns a.late, made on first use.
func (a *act) lateFields() *actLate {
	if a.late == nil {
		a.late = new(actLate)
	}
	return a.late
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
	budgetGates map[string]*budgetGate
	// breakers by name; breakerList holds, in name order, the ones this
	// run's activities go through (the others are left alone).
	breakers    map[string]*breakerGate
	breakerList []*breakerGate
	// parked holds, per gate, the activities waiting for it to change.
	parked map[gate][]*act

	// recoveredFacts backs the timer_recovered events of Start.
	recoveredFacts timerFacts
	// slab holds the nodes and record copies New makes (recovery.go).
	slab   slab
	timers timerHeap
	// bulkTimers is set while Start arms the recovered timers: they are
	// appended, and the heap is built once (buildTimers).
	bulkTimers bool
	// sortedTimers is set while the heap is still the sorted array
	// buildTimers made (until the first fireDue).
	sortedTimers bool
	queue        readyQueue
	running      int

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
	// eventsFree and startsFree are the room left in the arrays the last
	// step's events and starts were appended to (step).
	eventsFree []event.Event
	startsFree []Attempt
	// rulesFree is the room left in the array the events' rule
	// references are taken from (ruleRefFor).
	rulesFree []event.RuleRef
}

// New builds a core over the planned instances and their loaded state.
// Nothing happens until Start.
func New(opts Options) *Core {
	c := &Core{
		opts:        opts,
		resolve:     opts.Resolve,
		byAddr:      map[string]*inst{},
		budgets:     map[string]*budgetState{},
		budgetGates: map[string]*budgetGate{},
		breakers:    map[string]*breakerGate{},
		parked:      map[gate][]*act{},
		dirtyAtt:    map[*record.Attempt]bool{},
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
	for _, name := range c.budgetOrder {
		c.budgetGates[name] = c.newBudgetGate(name)
	}
	for _, name := range sortedKeys(opts.Breakers) {
		cfg := opts.Breakers[name]
		if cfg.Name == "" {
			cfg.Name = name
		}
		c.breakers[name] = newBreakerGate(cfg, opts.BreakerState[name])
	}
	c.slab = newSlab(opts)
	c.all = make([]*act, 0, c.slab.acts)
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
		c.buildInstance(in, spec)
	}
	c.slab = slab{}
	c.refs()
	for _, name := range sortedKeys(c.breakers) {
		g := c.breakers[name]
		for _, a := range c.all {
			if slices.ContainsFunc(a.starts, func(u gateUse) bool { return u.g == gate(g) }) {
				c.breakerList = append(c.breakerList, g)
				break
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
	if !slices.ContainsFunc(acts, func(a *config.Activity) bool { return len(a.DependsOn) > 0 }) {
		// Nothing depends on anything: declaration order.
		return slices.Clone(acts)
	}
	index := make(map[string]int, len(acts))
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
		c.bulkTimers = true
		c.growStartEvents()
		for _, in := range c.insts {
			c.initInstance(in)
			c.settleState(in)
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
		c.buildTimers()
		c.recoveredFacts = timerFacts{}
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
			if g := c.budgetGateOf(a.budget); g != nil {
				g.ask(c, a, askOpts{force: true})
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
	// The step's events and starts go on where the last step's ended, in
	// the same arrays (see emit): three 432-byte events per attempt, a
	// couple of attempts a step, otherwise grown from nothing every step.
	c.out = Ready{Events: c.eventsFree, Start: c.startsFree}
	f()
	// Whatever the input, a timer due now fires now: an interrupted
	// attempt arms one due at once, and its next attempt must not wait
	// for a wake-up round trip through the shell.
	c.fireDue()
	c.pump()
	c.unstick()
	c.emitOutputs()
	c.checkDone()
	c.flush()
	if !c.stopped && !c.finished {
		if c.timers.Len() > 0 {
			c.out.Wake = c.timers[0].a.rec.Timer.FireAt
		}
		// The end of a break is told to the views on time.
		if at := c.nextBreakerWake(); !at.IsZero() && (c.out.Wake.IsZero() || at.Before(c.out.Wake)) {
			c.out.Wake = at
		}
	}
	out := c.out
	c.out = Ready{}
	// What is handed out is clipped, so that nothing appended to it
	// (there, or here in the next step) writes into what the other holds.
	c.eventsFree, out.Events = carve(out.Events)
	c.startsFree, out.Start = carve(out.Start)
	return out
}

// stepChunk is how many events (or starts) a new array holds: a few dozen
// steps of small ones, at 30 KB of events.
const stepChunk = 64

// roomFor1 returns s with room to append one element: s itself while it
// has capacity left, else a copy in a new array of at least stepChunk
// elements. A new array is zero past its length (emitRecovered relies on
// it).
func roomFor1[T any](s []T) []T {
	if len(s) < cap(s) {
		return s
	}
	n := make([]T, len(s), max(2*len(s), stepChunk))
	copy(n, s)
	return n
}

// carve splits what a step appended to from the room left after it: the
// step's part, clipped to its length (nil when empty, as a step that
// appended nothing always returned), and the rest, empty, for the next
// step to append to.
func carve[T any](s []T) (rest, step []T) {
	rest = s[len(s):]
	if len(s) == 0 {
		return rest, nil
	}
	return rest, s[:len(s):len(s)]
}

// flush turns everything marked dirty during the step into mutations.
func (c *Core) flush() {
	n := len(c.instDirty) + len(c.dirtyAtts) + len(c.dirtyActs)
	for _, g := range c.breakerList {
		if g.dirty {
			n++
		}
	}
	for _, name := range c.budgetOrder {
		if c.budgets[name].dirty {
			n++
		}
	}
	if n == 0 {
		return
	}
	ms := make([]record.Mutation, 0, n+len(c.out.Persist))
	ms = append(ms, c.out.Persist...)
	for _, in := range c.instDirty {
		r := *in.rec
		ms = append(ms, record.Mutation{Instance: &r})
	}
	// The step's copies of attempt and activity records share one array
	// of each kind: the mutations are read by the commit and dropped
	// together, and one allocation a step instead of one a record is
	// what the collector sees of them (an http attempt writes two of
	// each).
	atts := make([]record.Attempt, len(c.dirtyAtts))
	for i, att := range c.dirtyAtts {
		r := &atts[i]
		*r = *att
		if att.Error != nil {
			e := *att.Error
			r.Error = &e
		}
		ms = append(ms, record.Mutation{Attempt: r})
	}
	acts := make([]record.Activity, len(c.dirtyActs))
	for i, a := range c.dirtyActs {
		r := &acts[i]
		*r = copyActivity(a.rec)
		ms = append(ms, record.Mutation{Activity: r, NoTimerBefore: r.Timer == nil && a.timerWritten == timerNone})
		a.timerWritten = timerNone
		if r.Timer != nil {
			a.timerWritten = timerSet
		}
		a.dirty = false
	}
	for _, name := range c.budgetOrder {
		b := c.budgets[name]
		if b.dirty {
			ms = append(ms, record.Mutation{Budget: &record.Budget{Name: name, Stamps: append([]time.Time(nil), b.rec.Stamps...)}})
			b.dirty = false
		}
	}
	for _, g := range c.breakerList {
		if g.dirty {
			ms = append(ms, record.Mutation{Breaker: g.record()})
			g.dirty = false
		}
	}
	// The lists are reused from step to step (emptied of their pointers,
	// which would otherwise keep ended attempts' records alive).
	c.instDirty, c.dirtyActs, c.dirtyAtts = emptied(c.instDirty), emptied(c.dirtyActs), emptied(c.dirtyAtts)
	clear(c.dirtyAtt)
	c.out.Persist = ms
}

// emptied is s with no element, its array kept and cleared.
func emptied[T any](s []T) []T {
	clear(s)
	return s[:0]
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

func (c *Core) emit(ev event.Event) { c.out.Events = append(roomFor1(c.out.Events), ev) }

func (c *Core) find(addr, name string) *act {
	in := c.byAddr[addr]
	if in == nil {
		return nil
	}
	return in.byName[name]
}

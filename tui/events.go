package tui

import (
	"strings"
	"time"

	"github.com/charmbracelet/x/ansi"

	"github.com/wf-engine/wf/executor/event"
)

// status is what a row is doing.
type status int

const (
	stPending status = iota
	stRunning
	stAttemptFailed // between attempt_failed and the decision that follows
	stRetryWait
	stBudgetWait
	stSleeping
	stSucceeded
	stFailed
	stSkipped
	stUnchanged
	stCircuitWait // waiting for its circuit breaker
)

// attemptRec is one attempt as seen in the events, for the history and
// logs views.
type attemptRec struct {
	n         int
	start     time.Time
	end       time.Time
	ended     bool
	succeeded bool
	err       *event.Error
	wait      time.Duration
	hasWait   bool
	waitSrc   string
	output    *event.Output
	dropped   bool // output forgotten (see outputKeep)
}

// row is one activity.
type row struct {
	instance    string
	activity    string // "activity.NAME"
	kind        string
	action      string
	maxAttempts int // 0 = unlimited
	st          status

	attempt int           // the current or last attempt number
	rule    event.RuleRef // which rule speaks, what the rules counted
	// lastUncounted is set when the last attempt failed for real but no
	// rule counted it (flagged non-retryable, no rule matched).
	lastUncounted bool

	started    time.Time
	firstStart time.Time
	fireAt     time.Time     // retry, budget or sleep wake-up time
	waitTotal  time.Duration // full length of the current wait, for the bar
	waitSrc    string
	budget     string
	breaker    string    // the breaker a circuit wait waits for
	lastBeat   time.Time // the running attempt's last heartbeat
	err        *event.Error
	reason     string
	duration   time.Duration // activity_succeeded duration
	history    []attemptRec
	// knownAfter is set on an activity whose for_each is not known yet.
	knownAfter []string
	// group is set on the header row of an activity with for_each, parent
	// on its elements' rows (groups.go).
	group  *rowGroup
	parent *row
}

// logEntry is one event log line; a retry_scheduled right after the
// attempt_failed it answers is merged into the same line (retry). ev
// points into the batch it came in: batches are never modified once
// published, and not copying them keeps the log's cost per event flat.
type logEntry struct {
	ev    *event.Event
	retry retryNote
}

// retryNote is what the log line says of a merged retry_scheduled; kept
// by value, so merging allocates nothing.
type retryNote struct {
	attempt int // 0: none merged
	source  string
	delay   time.Duration
}

// delaySource is where a retry's delay came from, as the dashboard says
// it: a delay the executor marks "server" is the server's Retry-After only
// for an http activity; for exec it is the retry_after the activity wrote
// to its error file ("activity").
func delaySource(ev *event.Event) string {
	if ev.DelaySource == event.SourceServer && ev.Kind != "" && ev.Kind != "http" {
		return "activity"
	}
	return ev.DelaySource
}

func noteRetry(ev *event.Event) retryNote {
	n := retryNote{attempt: ev.Attempt, source: delaySource(ev)}
	if ev.DelayMs != nil {
		n.delay = time.Duration(*ev.DelayMs) * time.Millisecond
	} else if ev.FireAt != nil {
		n.delay = ev.FireAt.Sub(ev.Time)
	}
	return n
}

// Apply folds a batch of events into the model. It is the whole cost of
// an event for the dashboard: rendering happens separately, at most once
// per message.
func (m *Model) Apply(evs []event.Event) {
	for i := range evs {
		m.apply(&evs[i])
	}
	m.filter.dirty = true
}

// rowKey identifies a row; a struct key costs no allocation per event.
type rowKey struct{ instance, activity string }

func (m *Model) rowFor(ev *event.Event) *row {
	k := rowKey{ev.Instance, ev.Activity}
	if i, ok := m.index[k]; ok {
		return m.rows[i]
	}
	// An activity the plan did not list (a watcher that joined after the
	// plan fell out of the history): show it anyway.
	r := &row{instance: ev.Instance, activity: ev.Activity, kind: ev.Kind, maxAttempts: ev.MaxAttempts}
	m.addRow(r)
	return r
}

func (m *Model) addRow(r *row) {
	if m.attach(r) {
		return
	}
	m.index[rowKey{r.instance, r.activity}] = len(m.rows)
	m.rows = append(m.rows, r)
	m.noteInstance(r.instance)
	m.noteWidth(r)
}

// noteWidth keeps longest the widest display name.
func (m *Model) noteWidth(r *row) {
	m.longest = max(m.longest, ansi.StringWidth(m.displayName(r)))
}

func (m *Model) noteInstance(inst string) {
	if inst == "" {
		return
	}
	for _, x := range m.instances {
		if x == inst {
			return
		}
	}
	m.instances = append(m.instances, inst)
	if len(m.instances) > 1 {
		// Rows now carry their instance; recompute the widest name.
		m.longest = 4
		for _, r := range m.rows {
			m.longest = max(m.longest, ansi.StringWidth(m.displayName(r)))
		}
	}
}

func (m *Model) apply(ev *event.Event) {
	if m.begin.IsZero() && !ev.Time.IsZero() {
		m.begin = ev.Time
	}
	// Every level of a nested budget has its gauge.
	for u := ev.Budget; u != nil; u = u.Parent {
		m.noteBudget(*u)
	}
	m.applyCircuit(ev)
	if ev.Type == event.Heartbeat {
		// Once a second per activity: not worth an event log line.
		if r := m.rowFor(ev); r.attempt == ev.Attempt {
			r.lastBeat = ev.Time
		}
		return
	}
	m.addLog(ev)
	switch ev.Type {
	case event.Plan:
		m.applyPlan(ev)
		return
	case event.RunCompleted:
		m.final.Completed = true
		m.final.Status = ev.Status
		m.final.Summary = ev.Summary
		m.end = ev.Time
		return
	case event.ActivityExpanded:
		m.applyExpanded(ev)
		return
	case event.ActivityRemoved, event.ActivityMoved, event.OutputKnown:
		return // the event log says them; they have no row
	}
	if ev.Activity == "" {
		return
	}
	r := m.rowFor(ev)
	defer m.noteStatus(r, r.st)
	if ev.Kind != "" {
		r.kind = ev.Kind
	}
	prevCounted, hadRule := r.rule.CountedAll, r.rule.Rules > 0
	if ev.Rule != nil {
		r.rule = *ev.Rule
	}
	if ev.MaxAttempts != 0 || ev.Rule != nil {
		// With rule facts 0 means unlimited; without, it means unset.
		r.maxAttempts = ev.MaxAttempts
	}
	switch ev.Type {
	case event.AttemptStarted:
		m.attempts++
		if ev.Attempt > 1 {
			m.retries++
		}
		r.attempt = ev.Attempt
		r.started = ev.Time
		if r.firstStart.IsZero() || ev.Attempt == 1 {
			r.firstStart = ev.Time
		}
		r.err = nil
		r.lastUncounted = false
		r.history = append(r.history, attemptRec{n: ev.Attempt, start: ev.Time})
		r.st = stRunning
		if r.kind == "sleep" {
			r.st = stSleeping
			r.setWait(ev.Time, ev.FireAt, ev.DelayMs)
		}
	case event.AttemptSucceeded:
		if a := r.lastAttempt(ev.Attempt); a != nil {
			a.end, a.ended, a.succeeded = endTime(a, ev), true, true
			a.output = ev.Output
		}
		r.dropOldOutput()
	case event.AttemptFailed:
		r.err = ev.Error
		r.attempt = max(r.attempt, ev.Attempt)
		if a := r.lastAttempt(ev.Attempt); a != nil {
			a.end, a.ended, a.err, a.output = endTime(a, ev), true, ev.Error, ev.Output
		} else {
			r.history = append(r.history, attemptRec{n: ev.Attempt, end: ev.Time, ended: true, err: ev.Error, output: ev.Output})
		}
		r.dropOldOutput()
		interrupted := ev.Error != nil && ev.Error.Type == errInterrupted
		if ev.Rule != nil && hadRule {
			r.lastUncounted = ev.Rule.CountedAll == prevCounted && !interrupted
		} else {
			r.lastUncounted = ev.Error != nil && ev.Error.NonRetryable
		}
		r.st = stAttemptFailed
	case event.RetryScheduled:
		r.st = stRetryWait
		r.waitSrc = delaySource(ev)
		r.setWait(ev.Time, ev.FireAt, ev.DelayMs)
		if a := r.lastAttempt(ev.Attempt - 1); a != nil && ev.DelaySource != "manual" {
			a.wait, a.hasWait, a.waitSrc = r.waitTotal, true, delaySource(ev)
		}
		r.nextAttempt(ev.Attempt)
	case event.CircuitWait:
		r.st = stCircuitWait
		r.breaker = ev.Breaker
		r.nextAttempt(ev.Attempt)
	case event.BudgetWait:
		r.st = stBudgetWait
		if ev.Budget != nil {
			// A nested budget: the level that refused.
			r.budget = ev.Budget.Name
			if ex := ev.Budget.Exhausted(); ex != nil {
				r.budget = ex.Name
			}
		}
		r.setWait(ev.Time, ev.FireAt, ev.DelayMs)
		if a := r.lastAttempt(ev.Attempt - 1); a != nil {
			a.wait, a.hasWait, a.waitSrc = r.waitTotal, true, "budget"
		}
		r.nextAttempt(ev.Attempt)
	case event.TimerRecovered:
		if r.kind == "sleep" {
			r.st = stSleeping
		} else {
			r.st = stRetryWait
			r.waitSrc = delaySource(ev)
			r.nextAttempt(ev.Attempt)
		}
		r.setWait(ev.Time, ev.FireAt, ev.DelayMs)
	case event.ActivitySucceeded:
		r.st = stSucceeded
		if ev.DurationMs != nil {
			r.duration = time.Duration(*ev.DurationMs) * time.Millisecond
		} else if !r.firstStart.IsZero() {
			r.duration = ev.Time.Sub(r.firstStart)
		}
		if ev.Attempt > 0 {
			r.attempt = ev.Attempt
		}
	case event.ActivityFailed:
		r.st = stFailed
		r.reason = ev.Reason
		if ev.Error != nil {
			r.err = ev.Error
		}
	case event.ActivitySkipped:
		r.st = stSkipped
		r.reason = ev.Reason
	}
}

// outputKeep is how many of a row's latest attempts keep their captured
// output (up to 2 x event.OutputTail each), so that a long retry storm
// cannot grow the dashboard without bound.
const outputKeep = 10

// dropOldOutput forgets the output of the attempt that just fell out of
// the latest outputKeep.
func (r *row) dropOldOutput() {
	if i := len(r.history) - 1 - outputKeep; i >= 0 && r.history[i].output != nil {
		r.history[i].output = nil
		r.history[i].dropped = true
	}
}

// errInterrupted is the error type of an attempt the engine stopped.
const errInterrupted = "interrupted"

// nextAttempt remembers which attempt a pending timer will start, so the
// row can say "retry 3 in 2.4s". retry_scheduled carries the next number.
func (r *row) nextAttempt(n int) {
	if n > 0 {
		r.attempt = n - 1
	}
}

func (r *row) setWait(at time.Time, fireAt *time.Time, delayMs *int64) {
	r.fireAt = time.Time{}
	r.waitTotal = 0
	if fireAt != nil {
		r.fireAt = *fireAt
		r.waitTotal = fireAt.Sub(at)
	}
	if delayMs != nil {
		d := time.Duration(*delayMs) * time.Millisecond
		if r.fireAt.IsZero() {
			r.fireAt = at.Add(d)
		}
		if d > 0 {
			r.waitTotal = d
		}
	}
}

func (r *row) lastAttempt(n int) *attemptRec {
	for i := len(r.history) - 1; i >= 0; i-- {
		if r.history[i].n == n {
			return &r.history[i]
		}
	}
	return nil
}

func endTime(a *attemptRec, ev *event.Event) time.Time {
	if ev.DurationMs != nil && !a.start.IsZero() {
		return a.start.Add(time.Duration(*ev.DurationMs) * time.Millisecond)
	}
	return ev.Time
}

func (m *Model) applyPlan(ev *event.Event) {
	m.noteInstance(ev.Instance)
	for _, a := range ev.Activities {
		k := rowKey{ev.Instance, a.Activity}
		var r *row
		if i, ok := m.index[k]; ok {
			r = m.rows[i]
		} else {
			r = &row{instance: ev.Instance, activity: a.Activity}
			m.addRow(r)
		}
		r.kind, r.action, r.maxAttempts = a.Kind, a.Action, a.MaxAttempts
		r.attempt = a.Attempts
		before := r.st
		r.st = stPending
		if a.Action == "unchanged" {
			r.st = stUnchanged
		}
		r.knownAfter = a.KnownAfter
		m.noteStatus(r, before)
		if r.parent != nil {
			m.regroup(r.parent)
		}
	}
}

func (m *Model) noteBudget(b event.BudgetUsage) {
	b.Parent = nil // each level has its own gauge
	if i, ok := m.budgetIdx[b.Name]; ok {
		m.budgets[i] = b
		return
	}
	m.budgetIdx[b.Name] = len(m.budgets)
	m.budgets = append(m.budgets, b)
}

func (m *Model) addLog(ev *event.Event) {
	if ev.Type == event.RetryScheduled && len(m.log) > 0 {
		last := &m.log[len(m.log)-1]
		if last.retry.attempt == 0 && last.ev.Type == event.AttemptFailed &&
			last.ev.Instance == ev.Instance && last.ev.Activity == ev.Activity {
			last.retry = noteRetry(ev)
			return
		}
	}
	if len(m.log) == logCap {
		// Drop the older half at once so appends stay amortised O(1).
		n := copy(m.log, m.log[logCap/2:])
		clear(m.log[n:])
		m.log = m.log[:n]
	}
	m.log = append(m.log, logEntry{ev: ev})
}

func shortName(activity string) string { return strings.TrimPrefix(activity, "activity.") }

// displayName is a row's name: the activity (after the instance, with
// several), an element as its key indented under its activity.
func (m *Model) displayName(r *row) string {
	if r.parent != nil {
		return "    " + strings.TrimPrefix(r.activity, r.parent.activity)
	}
	name := shortName(r.activity)
	if len(m.instances) > 1 {
		name = r.instance + " " + name
	}
	if r.group != nil && len(r.group.members) > 0 {
		name = foldMark(r.group) + name
	}
	return name
}

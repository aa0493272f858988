// Package tui is the bubbletea dashboard over a run's event stream: one row
// per activity with live retry countdowns, budget gauges, an event log and
// each activity's attempt history. It only reads events (wf apply feeds it
// from the bus, wf watch from the event socket) and talks back through a
// Controller, so it can never slow the executor down.
package tui

import (
	"strings"
	"time"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"

	"github.com/wf-engine/wf/executor/event"
)

// Controller is the run behind the dashboard. cmd/wf implements it around
// the executor; a read-only watcher may pass nil.
type Controller interface {
	// FireNow fires the activity's pending retry timer now.
	FireNow(instance, activity string)
	// Detach stops starting attempts and saves state (q).
	Detach()
	// Interrupt is ctrl+c: the controller counts presses (the first stops
	// gracefully, the second cancels running attempts).
	Interrupt()
}

// Options configures the dashboard.
type Options struct {
	// Title heads the dashboard, e.g. "wf apply".
	Title string
	// Color enables lipgloss styles; false renders plain text.
	Color bool
	// Now is the clock; nil means time.Now. Tests inject a fake.
	Now func() time.Time
	// Controller receives the operator's commands; nil disables them.
	Controller Controller
	// ReadOnly is wf watch: q and ctrl+c just quit the view.
	ReadOnly bool
}

// EventsMsg carries a batch of events (everything that queued up since the
// previous batch).
type EventsMsg struct{ Events []event.Event }

// streamEndMsg says the subscription ended (bus closed or socket dropped).
type streamEndMsg struct{}

// tickMsg drives countdowns and spinners while something is live.
type tickMsg struct{}

// tickInterval gives 10 frames a second, enough for a smooth countdown.
const tickInterval = 100 * time.Millisecond

// logCap bounds the event log kept for display.
const logCap = 500

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
)

// attemptRec is one attempt as seen in the events, for the history view.
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
}

// row is one activity.
type row struct {
	instance    string
	activity    string // "activity.NAME"
	kind        string
	action      string
	maxAttempts int // 0 = unlimited
	st          status

	attempt    int // the current or last attempt number
	started    time.Time
	firstStart time.Time
	fireAt     time.Time     // retry, budget or sleep wake-up time
	waitTotal  time.Duration // full length of the current wait, for the bar
	waitSrc    string
	budget     string
	err        *event.Error
	reason     string
	duration   time.Duration // activity_succeeded duration
	history    []attemptRec
}

// logEntry is one event log line; a retry_scheduled right after the
// attempt_failed it answers is merged into the same line.
type logEntry struct {
	ev     event.Event
	follow *event.Event
}

// Final is how the dashboard ended.
type Final struct {
	// Completed is true once run_completed arrived; Status and Summary
	// are taken from it.
	Completed bool
	Status    string
	Summary   *event.Summary
	// Detached is true when the user pressed q.
	Detached bool
	// Interrupts counts ctrl+c presses passed to the controller.
	Interrupts int
	// StreamClosed is true when the events stopped without run_completed
	// (for wf watch: the connection to the apply dropped).
	StreamClosed bool
}

type keyMap struct {
	Up, Down, Enter, Back, Fire, Quit, Interrupt key.Binding
}

func newKeyMap(readOnly bool) keyMap {
	quitHelp := "detach"
	if readOnly {
		quitHelp = "quit"
	}
	return keyMap{
		Up:        key.NewBinding(key.WithKeys("up", "k"), key.WithHelp("↑/k", "up")),
		Down:      key.NewBinding(key.WithKeys("down", "j"), key.WithHelp("↓/j", "down")),
		Enter:     key.NewBinding(key.WithKeys("enter"), key.WithHelp("enter", "history")),
		Back:      key.NewBinding(key.WithKeys("esc"), key.WithHelp("esc", "back")),
		Fire:      key.NewBinding(key.WithKeys("r"), key.WithHelp("r", "retry now")),
		Quit:      key.NewBinding(key.WithKeys("q"), key.WithHelp("q", quitHelp)),
		Interrupt: key.NewBinding(key.WithKeys("ctrl+c"), key.WithHelp("ctrl+c", "interrupt")),
	}
}

// Model is the dashboard, a tea.Model.
type Model struct {
	opts   Options
	keys   keyMap
	styles styles

	width, height int
	sized         bool // a real window size arrived (output is a terminal)
	now           time.Time

	rows      []*row
	index     map[string]int // instance+"\x00"+activity -> rows index
	instances []string
	budgets   []event.BudgetUsage
	budgetIdx map[string]int
	log       []logEntry

	begin    time.Time // first event
	end      time.Time // run_completed
	attempts int
	retries  int
	selected int
	offset   int
	detail   bool // history view open
	ticking  bool
	final    Final
	quitting bool
	notice   string
}

// NewModel returns a dashboard with no events yet.
func NewModel(opts Options) *Model {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Title == "" {
		opts.Title = "wf"
	}
	m := &Model{
		opts:      opts,
		keys:      newKeyMap(opts.ReadOnly || opts.Controller == nil),
		styles:    newStyles(opts.Color),
		width:     80,
		height:    24,
		index:     map[string]int{},
		budgetIdx: map[string]int{},
	}
	m.now = opts.Now()
	return m
}

// Final reports how the dashboard ended (valid after the program quit).
func (m *Model) Final() Final { return m.final }

// Init implements tea.Model.
func (m *Model) Init() tea.Cmd { return nil }

// Update implements tea.Model.
func (m *Model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	m.now = m.opts.Now()
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		if msg.Width > 0 && msg.Height > 0 {
			m.width, m.height, m.sized = msg.Width, msg.Height, true
		}
		m.clampScroll()
		return m, nil
	case EventsMsg:
		m.Apply(msg.Events)
		if m.final.Completed {
			return m, m.quit()
		}
		return m, m.armTick()
	case streamEndMsg:
		if !m.final.Completed {
			m.final.StreamClosed = true
		}
		return m, m.quit()
	case tickMsg:
		m.ticking = false
		return m, m.armTick()
	case tea.KeyPressMsg:
		return m, m.handleKey(msg)
	}
	return m, nil
}

func (m *Model) quit() tea.Cmd {
	m.quitting = true
	return tea.Quit
}

// armTick starts the ticker when something is live and it is not already
// running. When nothing runs or waits no tick is pending at all.
func (m *Model) armTick() tea.Cmd {
	if m.ticking || m.quitting || !m.live() {
		return nil
	}
	m.ticking = true
	return tea.Tick(tickInterval, func(time.Time) tea.Msg { return tickMsg{} })
}

// Ticking reports whether a tick is pending, for tests of the idle case.
func (m *Model) Ticking() bool { return m.ticking }

func (m *Model) live() bool {
	for _, r := range m.rows {
		switch r.st {
		case stRunning, stAttemptFailed, stRetryWait, stBudgetWait, stSleeping:
			return true
		}
	}
	return false
}

func (m *Model) handleKey(msg tea.KeyPressMsg) tea.Cmd {
	ctl := m.opts.Controller
	readOnly := m.opts.ReadOnly || ctl == nil
	switch {
	case key.Matches(msg, m.keys.Interrupt):
		if readOnly {
			return m.quit()
		}
		m.final.Interrupts++
		ctl.Interrupt()
		if m.final.Interrupts == 1 {
			m.notice = "interrupt: finishing running attempts (ctrl+c again to cancel them)"
		} else {
			m.notice = "interrupt: cancelling running attempts"
		}
		return nil
	case key.Matches(msg, m.keys.Quit):
		if !readOnly {
			m.final.Detached = true
			ctl.Detach()
		}
		return m.quit()
	case key.Matches(msg, m.keys.Up):
		if m.selected > 0 {
			m.selected--
		}
		m.clampScroll()
	case key.Matches(msg, m.keys.Down):
		if m.selected < len(m.rows)-1 {
			m.selected++
		}
		m.clampScroll()
	case key.Matches(msg, m.keys.Enter):
		if len(m.rows) > 0 {
			m.detail = true
		}
	case key.Matches(msg, m.keys.Back):
		m.detail = false
	case key.Matches(msg, m.keys.Fire):
		r := m.selectedRow()
		if r == nil || ctl == nil {
			return nil
		}
		if r.st != stRetryWait && r.st != stBudgetWait {
			m.notice = shortName(r.activity) + " has no pending retry"
			return nil
		}
		ctl.FireNow(r.instance, r.activity)
		m.notice = "fired " + r.activity + " now"
	}
	return nil
}

func (m *Model) selectedRow() *row {
	if m.selected < 0 || m.selected >= len(m.rows) {
		return nil
	}
	return m.rows[m.selected]
}

// Apply folds a batch of events into the model. It is the whole cost of
// an event for the dashboard: rendering happens separately, at most once
// per message.
func (m *Model) Apply(evs []event.Event) {
	for i := range evs {
		m.apply(&evs[i])
	}
}

func rowKey(instance, activity string) string { return instance + "\x00" + activity }

func (m *Model) rowFor(ev *event.Event) *row {
	k := rowKey(ev.Instance, ev.Activity)
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
	m.index[rowKey(r.instance, r.activity)] = len(m.rows)
	m.rows = append(m.rows, r)
	m.noteInstance(r.instance)
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
}

func (m *Model) apply(ev *event.Event) {
	if m.begin.IsZero() && !ev.Time.IsZero() {
		m.begin = ev.Time
	}
	if ev.Budget != nil {
		m.noteBudget(*ev.Budget)
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
	}
	if ev.Activity == "" {
		return
	}
	r := m.rowFor(ev)
	if ev.Kind != "" {
		r.kind = ev.Kind
	}
	switch ev.Type {
	case event.AttemptStarted:
		m.attempts++
		if ev.Attempt > 1 {
			m.retries++
		}
		r.attempt = ev.Attempt
		if ev.MaxAttempts != 0 {
			r.maxAttempts = ev.MaxAttempts
		}
		r.started = ev.Time
		if r.firstStart.IsZero() || ev.Attempt == 1 {
			r.firstStart = ev.Time
		}
		r.err = nil
		r.history = append(r.history, attemptRec{n: ev.Attempt, start: ev.Time})
		r.st = stRunning
		if r.kind == "sleep" {
			r.st = stSleeping
			r.setWait(ev.Time, ev.FireAt, ev.DelayMs)
		}
	case event.AttemptSucceeded:
		if a := r.lastAttempt(ev.Attempt); a != nil {
			a.end, a.ended, a.succeeded = endTime(a, ev), true, true
		}
	case event.AttemptFailed:
		r.err = ev.Error
		r.attempt = max(r.attempt, ev.Attempt)
		if a := r.lastAttempt(ev.Attempt); a != nil {
			a.end, a.ended, a.err = endTime(a, ev), true, ev.Error
		} else {
			r.history = append(r.history, attemptRec{n: ev.Attempt, end: ev.Time, ended: true, err: ev.Error})
		}
		r.st = stAttemptFailed
	case event.RetryScheduled:
		r.st = stRetryWait
		r.waitSrc = ev.DelaySource
		r.setWait(ev.Time, ev.FireAt, ev.DelayMs)
		if a := r.lastAttempt(ev.Attempt - 1); a != nil && ev.DelaySource != "manual" {
			a.wait, a.hasWait, a.waitSrc = r.waitTotal, true, ev.DelaySource
		}
		r.nextAttempt(ev.Attempt)
	case event.BudgetWait:
		r.st = stBudgetWait
		if ev.Budget != nil {
			r.budget = ev.Budget.Name
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
		k := rowKey(ev.Instance, a.Activity)
		var r *row
		if i, ok := m.index[k]; ok {
			r = m.rows[i]
		} else {
			r = &row{instance: ev.Instance, activity: a.Activity}
			m.addRow(r)
		}
		r.kind, r.action, r.maxAttempts = a.Kind, a.Action, a.MaxAttempts
		r.attempt = a.Attempts
		r.st = stPending
		if a.Action == "unchanged" {
			r.st = stUnchanged
		}
	}
}

func (m *Model) noteBudget(b event.BudgetUsage) {
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
		if last.follow == nil && last.ev.Type == event.AttemptFailed &&
			last.ev.Instance == ev.Instance && last.ev.Activity == ev.Activity {
			cp := *ev
			last.follow = &cp
			return
		}
	}
	// Plan events are large; the log only needs their header fields.
	cp := *ev
	if cp.Type == event.Plan {
		cp.Activities = nil
		cp.Time = ev.Time
		cp.Attempt = len(ev.Activities)
	}
	if len(m.log) == logCap {
		// Drop the older half at once so appends stay amortised O(1).
		n := copy(m.log, m.log[logCap/2:])
		m.log = m.log[:n]
	}
	m.log = append(m.log, logEntry{ev: cp})
}

func shortName(activity string) string { return strings.TrimPrefix(activity, "activity.") }

// clampScroll keeps the selected row inside the visible window.
func (m *Model) clampScroll() {
	if m.selected >= len(m.rows) {
		m.selected = max(0, len(m.rows)-1)
	}
	h := m.layout().rows
	if h <= 0 {
		return
	}
	if m.selected < m.offset {
		m.offset = m.selected
	}
	if m.selected >= m.offset+h {
		m.offset = m.selected - h + 1
	}
	if m.offset > max(0, len(m.rows)-h) {
		m.offset = max(0, len(m.rows)-h)
	}
	if m.offset < 0 {
		m.offset = 0
	}
}

// Package tui is the bubbletea dashboard over a run's event stream: one row
// per activity with live retry countdowns, budget gauges, an event log, and
// views of each activity's attempt history, captured output and error. It
// only reads events (wf apply feeds it from the bus, wf watch from the event
// socket) and talks back through a Controller, so it can never slow the
// executor down.
package tui

import (
	"time"

	tea "charm.land/bubbletea/v2"

	"github.com/wf-engine/wf/executor/event"
)

// Controller is the run behind the dashboard. cmd/wf implements it around
// the executor; a read-only watcher may pass nil.
type Controller interface {
	// FireNow fires the activity's pending retry timer now (r).
	FireNow(instance, activity string)
	// Detach is q in wf apply: stop starting attempts, let the running ones
	// finish, save state; the run ends "interrupted" and wf apply resumes
	// it later, exactly as the first ctrl+c. (The run does not go on in the
	// background: the name is the one cmd/wf implements.)
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
	// ReadOnly is wf watch: q and ctrl+c just close the view.
	ReadOnly bool
}

// EventsMsg carries a batch of events (everything that queued up since the
// previous batch).
type EventsMsg struct{ Events []event.Event }

// streamEndMsg says the subscription ended (bus closed or socket dropped).
type streamEndMsg struct{}

// tickMsg drives countdowns and spinners while something is live.
type tickMsg struct{}

// noticeExpiredMsg clears a transient banner once its time is up.
type noticeExpiredMsg struct{ seq int }

// tickInterval gives 10 frames a second, enough for a smooth countdown.
const tickInterval = 100 * time.Millisecond

// noticeTTL is how long a transient banner ("fired activity.x now") stays.
const noticeTTL = 4 * time.Second

// logCap bounds the event log kept for display.
const logCap = 500

// Final is how the dashboard ended.
type Final struct {
	// Completed is true once run_completed arrived; Status and Summary
	// are taken from it.
	Completed bool
	Status    string
	Summary   *event.Summary
	// Stopped is true when the user pressed q in wf apply: the run stopped
	// starting attempts and wf apply resumes it later.
	Stopped bool
	// Interrupts counts ctrl+c presses passed to the controller.
	Interrupts int
	// StreamClosed is true when the events stopped without run_completed
	// (for wf watch: the connection to the apply dropped).
	StreamClosed bool
}

// screen is what the dashboard shows.
type screen int

const (
	screenMain    screen = iota // rows, budgets, event log
	screenHistory               // the selected activity's attempts
	screenLogs                  // one attempt's captured stdout/stderr
	screenError                 // the selected activity's whole error
)

// pane is the part of the main screen the navigation keys move.
type pane int

const (
	paneRows pane = iota
	paneLog
)

// Model is the dashboard, a tea.Model.
type Model struct {
	opts   Options
	keys   keyMap
	styles styles

	width, height int
	sized         bool // a real window size arrived (output is a terminal)
	now           time.Time
	// mouse and queryModes are set by Run when it reads a terminal.
	mouse, queryModes bool

	rows      []*row
	index     map[rowKey]int // -> rows index
	instances []string
	budgets   []event.BudgetUsage
	budgetIdx map[string]int
	// circuits are the breakers the run's activities are behind
	// (circuit.go).
	circuits   []event.CircuitInfo
	circuitIdx map[string]int
	log        []logEntry
	longest    int // widest display name, kept as rows arrive

	begin    time.Time // first event
	end      time.Time // run_completed
	attempts int
	retries  int

	// Selection is a position in the visible (filtered) rows; selRow
	// remembers which row it is, so a filter change keeps it.
	selected int
	selRow   int
	offset   int
	filter   filterState
	focus    pane
	logBack  int // event log lines scrolled back from the newest; 0 follows

	screen   screen
	back     []screen // screens to return to on esc
	attempt  int      // history/logs: index into the row's attempts
	scroll   int      // logs/error/help: first line shown
	helpOpen bool
	regions  regions // where the last frame put things, for the mouse

	ticking  bool
	final    Final
	quitting bool
	// status is the lasting state of the run (stopping, cancelling);
	// notice a transient banner that fades at noticeUntil.
	status      string
	notice      string
	noticeUntil time.Time
	noticeSeq   int
}

// regions are line ranges of the last main-screen frame.
type regions struct {
	rowsTop, rowsLen int
	logTop, logLen   int
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
		opts:       opts,
		keys:       newKeyMap(),
		styles:     newStyles(opts.Color),
		width:      80,
		height:     24,
		index:      map[rowKey]int{},
		budgetIdx:  map[string]int{},
		circuitIdx: map[string]int{},
		longest:    4,
	}
	m.now = opts.Now()
	return m
}

// Final reports how the dashboard ended (valid after the program quit).
func (m *Model) Final() Final { return m.final }

// readOnly is wf watch (or a dashboard without a controller): q and ctrl+c
// close the view and leave the run alone.
func (m *Model) readOnly() bool { return m.opts.ReadOnly || m.opts.Controller == nil }

// Init implements tea.Model.
func (m *Model) Init() tea.Cmd {
	if m.queryModes {
		// Synchronized output (no tearing) and grapheme widths, when the
		// terminal has them. The replies come back through Run's reader.
		return tea.Raw(queryModes)
	}
	return nil
}

// Update implements tea.Model.
func (m *Model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	m.now = m.opts.Now()
	m.expireNotice()
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
	case noticeExpiredMsg:
		if msg.seq == m.noticeSeq {
			m.notice = ""
		}
		return m, nil
	case tea.KeyPressMsg:
		return m, m.handleKey(msg)
	case tea.MouseWheelMsg:
		m.handleWheel(msg.Mouse())
		return m, nil
	case tea.MouseClickMsg:
		m.handleClick(msg.Mouse())
		return m, nil
	}
	return m, nil
}

// quit ends the program. The last frame stays in the terminal, so it is
// the dashboard, whatever view was open.
func (m *Model) quit() tea.Cmd {
	m.quitting = true
	m.screen, m.back, m.helpOpen = screenMain, nil, false
	m.filter.editing = false
	m.setFilter("")
	m.focus, m.logBack = paneRows, 0
	if m.final.Completed && m.status != "" {
		m.status = "stopped"
	}
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
		case stRunning, stAttemptFailed, stRetryWait, stBudgetWait, stSleeping, stCircuitWait:
			return true
		}
	}
	return false
}

// flash shows a transient banner and schedules its removal.
func (m *Model) flash(text string) tea.Cmd {
	m.noticeSeq++
	m.notice = text
	m.noticeUntil = m.now.Add(noticeTTL)
	seq := m.noticeSeq
	return tea.Tick(noticeTTL, func(time.Time) tea.Msg { return noticeExpiredMsg{seq: seq} })
}

// expireNotice drops a banner whose time is up by the model's clock, so a
// frame drawn for any other reason never shows a stale one.
func (m *Model) expireNotice() {
	if m.notice != "" && !m.now.Before(m.noticeUntil) {
		m.notice = ""
	}
}

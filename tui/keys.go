package tui

import (
	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"

	"github.com/wf-engine/wf/executor/event"
)

type keyMap struct {
	Up, Down, PageUp, PageDown, Home, End, Tab   key.Binding
	Enter, Logs, Error, Filter, Back, Prev, Next key.Binding
	Fire, Quit, Interrupt, Help                  key.Binding
}

func newKeyMap() keyMap {
	return keyMap{
		Up:        key.NewBinding(key.WithKeys("up", "k")),
		Down:      key.NewBinding(key.WithKeys("down", "j")),
		PageUp:    key.NewBinding(key.WithKeys("pgup", "ctrl+b")),
		PageDown:  key.NewBinding(key.WithKeys("pgdown", "ctrl+f", "space")),
		Home:      key.NewBinding(key.WithKeys("home", "g")),
		End:       key.NewBinding(key.WithKeys("end", "G")),
		Tab:       key.NewBinding(key.WithKeys("tab")),
		Enter:     key.NewBinding(key.WithKeys("enter")),
		Logs:      key.NewBinding(key.WithKeys("l")),
		Error:     key.NewBinding(key.WithKeys("e")),
		Filter:    key.NewBinding(key.WithKeys("/")),
		Back:      key.NewBinding(key.WithKeys("esc", "backspace")),
		Prev:      key.NewBinding(key.WithKeys("left", "[")),
		Next:      key.NewBinding(key.WithKeys("right", "]")),
		Fire:      key.NewBinding(key.WithKeys("r")),
		Quit:      key.NewBinding(key.WithKeys("q")),
		Interrupt: key.NewBinding(key.WithKeys("ctrl+c")),
		Help:      key.NewBinding(key.WithKeys("?")),
	}
}

func (m *Model) handleKey(msg tea.KeyPressMsg) tea.Cmd {
	k := m.keys
	if key.Matches(msg, k.Interrupt) {
		return m.interrupt()
	}
	if m.helpOpen {
		switch {
		case key.Matches(msg, k.Help, k.Back, k.Quit):
			m.helpOpen = false
			m.scroll = 0
		default:
			m.scrollBy(msg, &m.scroll, m.pagerHeight(), 1<<20)
		}
		return nil
	}
	if m.filter.editing {
		if done := m.editFilter(msg); done {
			return nil
		}
	}
	if key.Matches(msg, k.Help) {
		m.helpOpen = true
		m.scroll = 0
		return nil
	}
	if key.Matches(msg, k.Fire) {
		return m.fire()
	}
	switch m.screen {
	case screenMain:
		return m.mainKey(msg)
	case screenHistory:
		return m.historyKey(msg)
	default:
		return m.pagerKey(msg)
	}
}

// editFilter handles a key while the filter line is open; it reports
// whether the key was used up.
func (m *Model) editFilter(msg tea.KeyPressMsg) bool {
	switch msg.String() {
	case "enter":
		m.filter.editing = false
	case "esc":
		m.filter.editing = false
		m.setFilter("")
	case "backspace":
		if r := []rune(m.filter.text); len(r) > 0 {
			m.setFilter(string(r[:len(r)-1]))
		}
	case "ctrl+u":
		m.setFilter("")
	case "up", "down", "pgup", "pgdown", "home", "end":
		return false // navigate while typing
	default:
		if msg.Text != "" {
			m.setFilter(m.filter.text + msg.Text)
		}
	}
	return true
}

func (m *Model) mainKey(msg tea.KeyPressMsg) tea.Cmd {
	k := m.keys
	switch {
	case key.Matches(msg, k.Quit):
		if m.readOnly() {
			return m.quit()
		}
		return m.stop()
	case key.Matches(msg, k.Tab):
		if m.focus == paneRows {
			m.focus = paneLog
		} else {
			m.focus = paneRows
		}
	case key.Matches(msg, k.Enter):
		if m.selectedRow() != nil {
			m.attempt = -1
			m.open(screenHistory)
		}
	case key.Matches(msg, k.Logs):
		if m.selectedRow() != nil {
			m.attempt = -1
			m.open(screenLogs)
		}
	case key.Matches(msg, k.Error):
		if m.selectedRow() != nil {
			m.open(screenError)
		}
	case key.Matches(msg, k.Filter):
		m.filter.editing = true
		m.focus = paneRows
	case key.Matches(msg, k.Back):
		switch {
		case m.filter.text != "":
			m.setFilter("")
		case m.focus == paneLog:
			m.focus, m.logBack = paneRows, 0
		}
	case m.focus == paneLog:
		// logBack counts lines back from the newest: turn it into a
		// position from the oldest to move it like a selection.
		last := m.maxLogBack()
		pos := last - min(m.logBack, last)
		m.scrollBy(msg, &pos, m.layout().log, last)
		m.logBack = last - pos
	default:
		sel := m.selected
		m.scrollBy(msg, &sel, m.layout().rows, m.nVisible()-1)
		m.selectPos(sel)
	}
	return nil
}

func (m *Model) historyKey(msg tea.KeyPressMsg) tea.Cmd {
	k := m.keys
	r := m.selectedRow()
	switch {
	case r == nil || key.Matches(msg, k.Back, k.Quit):
		m.goBack()
	case key.Matches(msg, k.Logs, k.Enter):
		m.open(screenLogs)
	case key.Matches(msg, k.Error):
		m.open(screenError)
	default:
		i := m.attemptIdx(r)
		m.scrollBy(msg, &i, m.pagerHeight()-2, len(r.history)-1)
		m.pickAttempt(r, i)
	}
	return nil
}

func (m *Model) pagerKey(msg tea.KeyPressMsg) tea.Cmd {
	k := m.keys
	r := m.selectedRow()
	switch {
	case r == nil || key.Matches(msg, k.Back, k.Quit):
		m.goBack()
	case key.Matches(msg, k.Logs) && m.screen != screenLogs:
		m.attempt = -1
		m.open(screenLogs)
	case key.Matches(msg, k.Error) && m.screen != screenError:
		m.open(screenError)
	case m.screen == screenLogs && key.Matches(msg, k.Prev):
		m.pickAttempt(r, m.attemptIdx(r)-1)
		m.scroll = 0
	case m.screen == screenLogs && key.Matches(msg, k.Next):
		m.pickAttempt(r, m.attemptIdx(r)+1)
		m.scroll = 0
	default:
		m.scrollBy(msg, &m.scroll, m.pagerHeight(), 1<<20)
	}
	return nil
}

// scrollBy moves *pos for a navigation key within [0, last]; page is the
// page size. It reports whether msg was a navigation key.
func (m *Model) scrollBy(msg tea.KeyPressMsg, pos *int, page, last int) bool {
	k := m.keys
	page = max(1, page)
	switch {
	case key.Matches(msg, k.Up):
		*pos--
	case key.Matches(msg, k.Down):
		*pos++
	case key.Matches(msg, k.PageUp):
		*pos -= page
	case key.Matches(msg, k.PageDown):
		*pos += page
	case key.Matches(msg, k.Home):
		*pos = 0
	case key.Matches(msg, k.End):
		*pos = last
	default:
		return false
	}
	*pos = max(0, min(*pos, last))
	return true
}

// attemptIdx is the attempt the history and logs views show: the one
// picked, or the latest while m.attempt is -1, so that a view opened on a
// retrying activity follows its new attempts until the user picks one.
func (m *Model) attemptIdx(r *row) int {
	if m.attempt < 0 || m.attempt >= len(r.history) {
		return len(r.history) - 1
	}
	return m.attempt
}

// pickAttempt selects attempt i; picking the latest follows new ones.
func (m *Model) pickAttempt(r *row, i int) {
	i = max(0, min(i, len(r.history)-1))
	if i == len(r.history)-1 {
		m.attempt = -1
	} else {
		m.attempt = i
	}
}

// open shows a screen, remembering where esc goes back to.
func (m *Model) open(s screen) {
	for i, b := range m.back {
		if b == s {
			m.back = m.back[:i]
			m.screen = s
			m.scroll = 0
			return
		}
	}
	m.back = append(m.back, m.screen)
	m.screen = s
	m.scroll = 0
}

func (m *Model) goBack() {
	m.scroll = 0
	if n := len(m.back); n > 0 {
		m.screen = m.back[n-1]
		m.back = m.back[:n-1]
		return
	}
	m.screen = screenMain
}

// Stopping texts, longest first.
var (
	stoppingText = []string{
		"stopping: no new attempts; running ones finish, state is saved, wf apply exits 130 (wf apply resumes) · ctrl+c cancels them",
		"stopping: running attempts finish, then exit 130 (wf apply resumes) · ctrl+c cancels them",
		"stopping (wf apply resumes) · ctrl+c cancels running attempts",
	}
	cancellingText = []string{
		"cancelling running attempts (recorded as interrupted, never counted against a limit); wf apply resumes",
		"cancelling running attempts; wf apply resumes",
	}
)

// stop is q in wf apply: the first ctrl+c, under a key that says so.
func (m *Model) stop() tea.Cmd {
	if m.final.Stopped || m.final.Interrupts > 0 {
		return m.flash("already stopping: running attempts finish first (ctrl+c cancels them)")
	}
	m.final.Stopped = true
	m.opts.Controller.Detach()
	m.status = "stopping"
	return nil
}

func (m *Model) interrupt() tea.Cmd {
	if m.readOnly() {
		return m.quit()
	}
	m.final.Interrupts++
	m.opts.Controller.Interrupt()
	presses := m.final.Interrupts
	if m.final.Stopped {
		presses++ // q was the first
	}
	if presses == 1 {
		m.status = "stopping"
	} else {
		m.status = "cancelling"
	}
	return nil
}

func (m *Model) fire() tea.Cmd {
	r := m.selectedRow()
	ctl := m.opts.Controller
	if r == nil || ctl == nil {
		return nil
	}
	if r.st == stCircuitWait {
		// The breaker protects the downstream from every activity alike.
		return m.flash(shortName(r.activity) + " waits for circuit " + r.breaker + ": it cannot be fired by hand")
	}
	if r.st != stRetryWait && r.st != stBudgetWait {
		return m.flash(shortName(r.activity) + " has no pending retry")
	}
	ctl.FireNow(r.instance, r.activity)
	return m.flash("fired " + r.activity + " now")
}

// handleWheel scrolls what is under the pointer.
func (m *Model) handleWheel(ms tea.Mouse) {
	step := 0
	switch ms.Button {
	case tea.MouseWheelUp:
		step = -3
	case tea.MouseWheelDown:
		step = 3
	default:
		return
	}
	switch {
	case m.helpOpen:
		m.scroll = max(0, m.scroll+step)
	case m.screen == screenHistory:
		if r := m.selectedRow(); r != nil {
			m.pickAttempt(r, m.attemptIdx(r)+step/3)
		}
	case m.screen != screenMain:
		m.scroll = max(0, m.scroll+step)
	case ms.Y >= m.regions.logTop && ms.Y < m.regions.logTop+m.regions.logLen:
		m.logBack = max(0, m.logBack-step)
		m.clampLog()
	default:
		m.selectPos(max(0, min(m.nVisible()-1, m.selected+step)))
	}
}

// handleClick selects the row (or focuses the event log) under the pointer.
func (m *Model) handleClick(ms tea.Mouse) {
	if m.helpOpen || m.screen != screenMain || ms.Button != tea.MouseLeft {
		return
	}
	switch rg := m.regions; {
	case ms.Y >= rg.rowsTop && ms.Y < rg.rowsTop+rg.rowsLen:
		m.focus = paneRows
		m.selectPos(min(m.nVisible()-1, m.offset+ms.Y-rg.rowsTop))
	case ms.Y >= rg.logTop && ms.Y < rg.logTop+rg.logLen:
		m.focus = paneLog
	}
}

func (m *Model) selectedRow() *row {
	m.refreshVisible()
	return m.visRow(m.selected)
}

// selectPos selects the p-th visible row and scrolls it into view.
func (m *Model) selectPos(p int) {
	m.selected = max(0, p)
	if i := m.visIndex(m.selected); i >= 0 {
		m.selRow = i
	}
	m.clampScroll()
}

// visIndex is the rows index of the p-th visible row, or -1.
func (m *Model) visIndex(p int) int {
	if p < 0 || p >= m.nVisible() {
		return -1
	}
	if m.filter.text == "" {
		return p
	}
	return m.filter.visible[p]
}

// clampScroll keeps the selected row inside the visible window.
func (m *Model) clampScroll() {
	n := m.nVisible()
	if m.selected >= n {
		m.selected = max(0, n-1)
	}
	if i := m.visIndex(m.selected); i >= 0 {
		m.selRow = i
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
	m.offset = max(0, min(m.offset, n-h))
}

// clampLog keeps the event log's scroll-back inside what there is.
func (m *Model) clampLog() { m.logBack = max(0, min(m.logBack, m.maxLogBack())) }

// maxLogBack is how far back the event log can scroll.
func (m *Model) maxLogBack() int { return max(0, m.shownLogLen()-m.layout().log) }

// shownLogLen is the number of event log entries the filter lets through.
func (m *Model) shownLogLen() int {
	if m.filter.text == "" {
		return len(m.log)
	}
	n := 0
	for i := range m.log {
		if m.shownEntry(&m.log[i]) {
			n++
		}
	}
	return n
}

func (m *Model) shownEntry(e *logEntry) bool {
	return e.ev.Type == event.Plan || e.ev.Type == event.RunCompleted || m.shown(e.ev.Instance, e.ev.Activity)
}

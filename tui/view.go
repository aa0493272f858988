package tui

import (
	"fmt"
	"strings"
	"time"

	"charm.land/bubbles/v2/spinner"
	tea "charm.land/bubbletea/v2"
	"charm.land/lipgloss/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/wf-engine/wf/executor/event"
)

// styles holds every style the view uses; with colour off they are all
// empty so the output is plain text. Colour carries meaning: failures red,
// retries and waits for a budget amber, successes green, running cyan.
type styles struct {
	title, dim, sel, key, focus       lipgloss.Style
	ok, bad, warn, run, sleep, barOff lipgloss.Style
}

func newStyles(color bool) styles {
	if !color {
		return styles{}
	}
	amber := lipgloss.Color("214")
	return styles{
		title:  lipgloss.NewStyle().Bold(true),
		dim:    lipgloss.NewStyle().Foreground(lipgloss.Color("8")),
		sel:    lipgloss.NewStyle().Bold(true).Foreground(lipgloss.Color("12")),
		key:    lipgloss.NewStyle().Bold(true),
		focus:  lipgloss.NewStyle().Bold(true).Foreground(lipgloss.Color("12")),
		ok:     lipgloss.NewStyle().Foreground(lipgloss.Color("2")),
		bad:    lipgloss.NewStyle().Foreground(lipgloss.Color("1")),
		warn:   lipgloss.NewStyle().Foreground(amber),
		run:    lipgloss.NewStyle().Foreground(lipgloss.Color("6")),
		sleep:  lipgloss.NewStyle().Foreground(lipgloss.Color("5")),
		barOff: lipgloss.NewStyle().Foreground(lipgloss.Color("8")),
	}
}

// spinnerFrames comes from bubbles; the frame is derived from the clock
// rather than from the spinner's own tick so that one tick drives the
// whole dashboard (and stops when nothing is live).
var spinnerFrames = spinner.MiniDot

// layout is how many lines each part of the main screen gets.
type layout struct {
	header      int // title, counts, budgets, status
	budgetLines int
	// circuitLines: the breaker badges share one line.
	circuitLines int
	perLine      int // budgets side by side
	rows         int
	log          int
}

func (m *Model) layout() layout {
	l := layout{perLine: 1}
	if m.width >= 140 {
		l.perLine = max(1, min(len(m.budgets), m.width/70))
	}
	l.budgetLines = min((len(m.budgets)+l.perLine-1)/l.perLine, max(1, m.height/8))
	if len(m.circuits) > 0 {
		l.circuitLines = 1
	}
	l.header = 2 + l.budgetLines + l.circuitLines
	if m.status != "" || m.notice != "" {
		l.header++
	}
	// Two separators and the footer.
	free := m.height - l.header - 3
	nlog := m.shownLogLen()
	l.log = min(nlog, max(2, free/4), max(12, free/3))
	l.rows = max(1, free-l.log)
	if n := max(1, m.nVisible()); n < l.rows {
		l.rows = n
		// Give what the rows do not need to the log.
		l.log = min(nlog, max(0, free-l.rows))
	}
	return l
}

// View implements tea.Model. The dashboard renders inline (not in the
// alternate screen) so that the last frame stays in the terminal. It asks
// for the mouse (wheel and clicks) only when Run reads the terminal, and
// for nothing else: no keyboard enhancements, no bracketed paste.
func (m *Model) View() tea.View {
	v := tea.NewView(m.Render())
	v.DisableBracketedPasteMode = true
	if m.mouse && !m.quitting {
		v.MouseMode = tea.MouseModeCellMotion
	}
	return v
}

// Render returns the current frame as a string.
func (m *Model) Render() string {
	m.refreshVisible()
	m.expireNotice()
	w := max(20, m.width)
	var lines []string
	switch m.screen {
	case screenHistory:
		lines = m.renderHistory(w)
	case screenLogs:
		lines = m.renderLogs(w)
	case screenError:
		lines = m.renderError(w)
	default:
		lines = m.renderDashboard(w)
	}
	if m.helpOpen {
		lines = m.overlayHelp(lines, w)
	}
	if len(lines) > m.height && m.height > 0 {
		lines = lines[:m.height]
	}
	for i, l := range lines {
		lines[i] = strings.TrimRight(ansi.Truncate(l, w, "…"), " ")
	}
	return strings.Join(lines, "\n")
}

func (m *Model) elapsed() time.Duration {
	if m.begin.IsZero() {
		return 0
	}
	end := m.now
	if !m.end.IsZero() {
		end = m.end
	}
	return max(0, end.Sub(m.begin))
}

func (m *Model) renderDashboard(w int) []string {
	s := m.styles
	l := m.layout()
	out := m.header(w, l)

	n := m.nVisible()
	label := "activities"
	if n > l.rows {
		label = fmt.Sprintf("activities %d-%d of %d", m.offset+1, min(n, m.offset+l.rows), n)
	}
	if m.filter.text != "" {
		label += fmt.Sprintf(" · filter %q: %d of %d", m.filter.text, n, len(m.rows))
	}
	sepStyle := s.dim
	if m.focus == paneRows && m.filter.editing {
		sepStyle = s.focus
	}
	out = append(out, separator(label, w, sepStyle))

	m.regions.rowsTop, m.regions.rowsLen = len(out), 0
	if n == 0 && len(m.rows) > 0 {
		out = append(out, s.dim.Render("  no activity matches the filter (esc clears it)"))
	}
	first, last := m.offset, min(n, m.offset+l.rows)
	cols := m.columns(w, first, last)
	for i := first; i < last; i++ {
		out = append(out, m.renderRow(m.visRow(i), i == m.selected, cols))
	}
	m.regions.rowsLen = last - first

	label, sepStyle = "events", s.dim
	if m.focus == paneLog {
		label, sepStyle = "events · ↑↓ pgup pgdn scroll · G follow · tab back", s.focus
	}
	if m.logBack > 0 {
		label += fmt.Sprintf(" · %d newer below", m.logBack)
	}
	out = append(out, separator(label, w, sepStyle))
	m.regions.logTop, m.regions.logLen = len(out), l.log
	out = append(out, m.renderLog(w, l.log)...)
	out = append(out, m.footer(w))
	return out
}

// retryRate is retries / attempts as wf stats prints it (SPEC §9; the
// WfRetryRateHigh alert's ratio): "25.0%", "0.0%" before any attempt.
func retryRate(retries, attempts int) string {
	if attempts == 0 {
		return "0.0%"
	}
	return fmt.Sprintf("%.1f%%", 100*float64(retries)/float64(attempts))
}

// header is the title with the run's figures, the state counts, the
// budget gauges and the status line.
func (m *Model) header(w int, l layout) []string {
	s := m.styles
	stats := fmt.Sprintf("elapsed %s · attempts %d · retries %d · retry rate %s", fmtDur(m.elapsed()), m.attempts, m.retries, retryRate(m.retries, m.attempts))
	if m.final.Completed {
		st := s.ok
		if m.final.Status != event.StatusSucceeded {
			st = s.bad
		}
		stats = st.Render(m.final.Status) + s.dim.Render(" · "+stats)
	} else {
		stats = s.dim.Render(stats)
	}
	room := w - width(stats) - 3
	title := fit(room, m.titleForms()...)
	out := []string{s.title.Render(title) + "   " + stats}

	var running, waiting, pending, succeeded, failed, skipped, unchanged int
	for _, r := range m.rows {
		if r.group != nil && len(r.group.members) > 0 {
			continue // its elements are counted
		}
		switch r.st {
		case stRunning, stAttemptFailed:
			running++
		case stRetryWait, stBudgetWait, stSleeping, stCircuitWait:
			waiting++
		case stPending:
			pending++
		case stSucceeded:
			succeeded++
		case stFailed:
			failed++
		case stSkipped:
			skipped++
		case stUnchanged:
			unchanged++
		}
	}
	count := func(st lipgloss.Style, label string, n int) string {
		if n == 0 {
			st = s.dim
		}
		return st.Render(fmt.Sprintf("%s %d", label, n))
	}
	counts := []string{
		count(s.run, "running", running),
		count(s.warn, "waiting", waiting),
		count(s.ok, "succeeded", succeeded),
		count(s.bad, "failed", failed),
	}
	// The rarer counts only when they say something, to fit 80 columns.
	for _, c := range []struct {
		label string
		n     int
	}{{"pending", pending}, {"skipped", skipped}, {"unchanged", unchanged}} {
		if c.n > 0 {
			counts = append(counts, s.dim.Render(fmt.Sprintf("%s %d", c.label, c.n)))
		}
	}
	out = append(out, strings.Join(counts, "  "))

	cellW := w
	if l.perLine > 1 {
		cellW = (w - 3*(l.perLine-1)) / l.perLine
	}
	for i := 0; i < l.budgetLines; i++ {
		var cells []string
		for j := i * l.perLine; j < min(len(m.budgets), (i+1)*l.perLine); j++ {
			cells = append(cells, pad(m.renderBudget(m.budgets[j], cellW), cellW))
		}
		out = append(out, strings.Join(cells, "   "))
	}
	if l.circuitLines > 0 {
		out = append(out, m.circuitLine(w))
	}
	if line := m.statusLine(w); line != "" {
		out = append(out, line)
	}
	return out
}

// circuitLine is the breaker badges, as many as fit.
func (m *Model) circuitLine(w int) string {
	var parts []string
	used := 0
	for i, c := range m.circuits {
		room := w - used
		if len(parts) > 0 {
			room -= 3
		}
		b := m.renderCircuit(c, room)
		if width(b) > room {
			if rest := len(m.circuits) - i; len(parts) > 0 {
				parts = append(parts, m.styles.dim.Render(fmt.Sprintf("+%d", rest)))
			}
			break
		}
		parts = append(parts, b)
		used += width(b) + 3
	}
	return strings.Join(parts, "   ")
}

func (m *Model) titleForms() []string {
	t := m.opts.Title
	switch n := len(m.instances); {
	case n == 0:
		return []string{t}
	case n == 1:
		return []string{t + " · " + m.instances[0], m.instances[0]}
	default:
		return []string{t + " · " + strings.Join(m.instances, ", "), fmt.Sprintf("%s · %d instances", t, n)}
	}
}

// statusLine is the lasting run state (stopping, cancelling) and the
// transient banner.
func (m *Model) statusLine(w int) string {
	s := m.styles
	var status []string
	switch m.status {
	case "stopping":
		status = stoppingText
	case "cancelling":
		status = cancellingText
	case "stopped":
		status = []string{"stopped: state saved; run wf apply again to resume", "stopped (wf apply resumes)"}
	}
	switch {
	case len(status) > 0 && m.notice != "":
		st := fit(w/2, status...)
		return s.warn.Render(st) + "  " + s.warn.Render(fit(w-width(st)-2, m.notice))
	case len(status) > 0:
		return s.warn.Render(fit(w, status...))
	case m.notice != "":
		return s.warn.Render(fit(w, m.notice))
	}
	return ""
}

func (m *Model) renderBudget(b event.BudgetUsage, w int) string {
	s := m.styles
	frac := 0.0
	if b.MaxRetries > 0 {
		frac = float64(b.Used) / float64(b.MaxRetries)
	}
	window := fmtDur(time.Duration(b.WindowMs) * time.Millisecond)
	used := fmt.Sprintf("%d/%d", b.Used, b.MaxRetries)
	// The gauge turns amber at 80 % and red when the budget is spent.
	st := s.ok
	if frac >= 1 {
		st = s.bad
	} else if frac >= 0.8 {
		st = s.warn
	}
	// The figures are the point: shorten their wording, then the name.
	for _, text := range []string{used + " retries per " + window, used + " per " + window, used} {
		head := "budget " + b.Name + " "
		if free := w - width(head) - width(text) - 1; free >= 10 {
			return head + m.bar(frac, min(50, free, max(10, w/4)), st) + " " + st.Render(text)
		}
	}
	head := "budget " + truncMiddle(b.Name, max(4, w-7-10-width(used)-2)) + " "
	return head + m.bar(frac, 10, st) + " " + st.Render(used)
}

package tui

import (
	"fmt"
	"math"
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

// columns are the widths of a row's fields for a window width.
type columns struct {
	name, kind, attempt, trail, detail int
}

// trailMin is the window width from which rows show an attempt trail.
const trailMin = 140

// columns sizes the fields for the rows first..last shown: names as wide
// as the longest up to a fifth of the window (a quarter when wide), the
// attempt column as its longest label there, the rest for the detail.
func (m *Model) columns(w, first, last int) columns {
	c := columns{kind: 5, attempt: 13}
	nameCap := max(12, w/5)
	if w >= 160 {
		nameCap = w / 4
	}
	c.name = min(m.longest, nameCap)
	// Narrow: what the detail column can spare beyond 32 cells.
	attCap := max(13, min(24, w-c.name-43))
	if w >= 100 {
		attCap = w * 3 / 10
	}
	for i := first; i < last; i++ {
		r := m.visRow(i)
		c.attempt = max(c.attempt, width(fit(attCap, r.attemptLabels()...)))
		if w >= trailMin {
			c.trail = max(c.trail, min(trailCap, len(r.history)))
		}
	}
	// "> " + symbol + " " + name + " " + kind + " " + attempt + " " + [trail " "] + detail
	c.detail = max(10, w-4-c.name-1-c.kind-1-c.attempt-1)
	if c.trail > 0 {
		c.detail = max(10, c.detail-c.trail-1)
	}
	return c
}

func (m *Model) renderRow(r *row, selected bool, c columns) string {
	s := m.styles
	cursor := "  "
	name := pad(truncMiddle(m.displayName(r), c.name), c.name)
	if selected {
		cursor = s.sel.Render("> ")
		name = s.sel.Render(name)
	}
	sym, detail := m.describe(r, c.detail)
	line := cursor + sym + " " + name + " " + pad(ansi.Truncate(r.kind, c.kind, "…"), c.kind) + " " +
		pad(fit(c.attempt, r.attemptLabels()...), c.attempt) + " "
	if c.trail > 0 {
		line += pad(m.trail(r, c.trail), c.trail) + " "
	}
	return line + detail
}

// trailCap bounds the attempt trail; older attempts fold into "…".
const trailCap = 12

// trail is one mark per attempt, oldest first, in at most w cells:
// ✗ failed, ! interrupted, ✓ succeeded, • running.
func (m *Model) trail(r *row, w int) string {
	s := m.styles
	h := r.history
	var b strings.Builder
	if len(h) > w {
		b.WriteString(s.dim.Render("…"))
		h = h[len(h)-w+1:]
	}
	for _, a := range h {
		switch {
		case !a.ended:
			b.WriteString(s.run.Render("•"))
		case a.succeeded:
			b.WriteString(s.ok.Render("✓"))
		case a.err != nil && a.err.Type == errInterrupted:
			b.WriteString(s.dim.Render("!"))
		default:
			b.WriteString(s.warn.Render("✗"))
		}
	}
	return b.String()
}

// describe returns a row's symbol and what it is doing, in w cells.
func (m *Model) describe(r *row, w int) (string, string) {
	s := m.styles
	if r.group != nil && len(r.group.members) > 0 {
		return m.describeGroup(r, w)
	}
	switch r.st {
	case stRunning:
		frame := spinnerFrames.Frames[int(m.now.UnixMilli()/spinnerFrames.FPS.Milliseconds())%len(spinnerFrames.Frames)]
		bare := "running " + fmtDur(m.now.Sub(r.started))
		run := bare + m.beatNote(r)
		forms := []string{run, bare}
		if prev := r.lastAttempt(r.attempt - 1); prev != nil && prev.err != nil {
			forms = []string{run + " · after " + errText(prev.err), run + " · after " + errType(prev.err), run, bare}
		}
		return s.run.Render(frame), s.run.Render(fit(w, forms...))
	case stAttemptFailed:
		head := fmt.Sprintf("attempt %d failed", r.attempt)
		return s.warn.Render("!"), s.warn.Render(fit(w, head+" ("+errText(r.err)+")", head+" ("+errType(r.err)+")", head))
	case stRetryWait:
		left := r.fireAt.Sub(m.now)
		key := fmt.Sprintf("retry %d in %s", r.attempt+1, fmtDur(left))
		if left <= 0 {
			key = fmt.Sprintf("retry %d now", r.attempt+1)
		}
		forms := []string{key}
		switch r.waitSrc {
		case "server":
			forms = []string{key + " (server asked)", key + " (server)", key}
		case "activity":
			forms = []string{key + " (activity asked)", key + " (activity)", key}
		}
		var suffix string
		if r.err != nil {
			suffix = " · " + errText(r.err)
		}
		return s.warn.Render("◌"), m.withBar(forms, suffix, r, w, s.warn)
	case stBudgetWait:
		forms := []string{"waiting for budget " + r.budget, "budget " + r.budget, "budget"}
		if left := r.fireAt.Sub(m.now); !r.fireAt.IsZero() && left > 0 {
			frees := "frees in " + fmtDur(left)
			forms = []string{forms[0] + " · " + frees, forms[1] + " · " + frees, "budget · " + frees, frees}
		}
		return s.warn.Render("⏸"), s.warn.Render(fit(w, forms...))
	case stCircuitWait:
		return m.describeCircuitWait(r, w)
	case stSleeping:
		if r.fireAt.IsZero() {
			return s.sleep.Render("◔"), s.sleep.Render(fit(w, "sleeping "+fmtDur(m.now.Sub(r.started))))
		}
		if !r.fireAt.After(m.now) {
			// Past its end (a resumed sleep whose end passed while wf was
			// stopped): it ends at once.
			return s.sleep.Render("◔"), s.sleep.Render(fit(w, "sleep due now", "due now"))
		}
		left := fmtDur(r.fireAt.Sub(m.now))
		return s.sleep.Render("◔"), m.withBar([]string{"sleeping " + left + " left", left + " left"}, "", r, w, s.sleep)
	case stSucceeded:
		n := "1 attempt"
		if r.attempt != 1 {
			n = fmt.Sprintf("%d attempts", r.attempt)
		}
		d := fmtDur(r.duration)
		return s.ok.Render("✓"), s.ok.Render(fit(w, "succeeded after "+n+" in "+d, "succeeded · "+n+" · "+d, "ok "+d))
	case stFailed:
		head := "failed: " + errType(r.err) + reasonText(r.reason)
		forms := []string{head, errType(r.err) + reasonText(r.reason), "failed: " + errType(r.err), "failed"}
		if msg := errMessage(r.err); msg != "" {
			full := head + ": " + msg
			// A long message keeps its start; e shows it whole.
			if room := w - width(head) - 2; width(full) > w && room >= 16 {
				full = head + ": " + ansi.Truncate(msg, room, "…")
			}
			forms = append([]string{full}, forms...)
		}
		return s.bad.Render("✗"), s.bad.Render(fit(w, forms...))
	case stSkipped:
		return s.dim.Render("⊘"), s.dim.Render(fit(w, "skipped ("+skipWhy(r.reason)+")", "skipped"))
	case stUnchanged:
		return s.dim.Render("="), s.dim.Render("unchanged")
	}
	return s.dim.Render("…"), s.dim.Render(fit(w, pendingText(r), "pending"))
}

func pendingText(r *row) string {
	if len(r.knownAfter) > 0 {
		return "pending (elements known after " + strings.Join(r.knownAfter, ", ") + ")"
	}
	switch r.action {
	case "resume":
		return "pending (resume)"
	case "rerun":
		return "pending (re-run)"
	case "retry_failed":
		return "pending (retry failed)"
	}
	return "pending"
}

// withBar draws the first text form that leaves room for a draining
// countdown bar, with suffix when that fits too; the bar grows with the
// window up to a third of the detail column.
func (m *Model) withBar(forms []string, suffix string, r *row, w int, st lipgloss.Style) string {
	if r.waitTotal > 0 {
		frac := float64(r.fireAt.Sub(m.now)) / float64(r.waitTotal)
		barMax := max(24, min(48, w/3))
		for _, text := range forms {
			if barW := min(barMax, w-width(text)-width(suffix)-1); suffix != "" && barW >= 20 {
				return st.Render(text) + " " + m.bar(frac, barW, st) + st.Render(suffix)
			}
			if barW := min(barMax, w-width(text)-1); barW >= 6 {
				return st.Render(text) + " " + m.bar(frac, barW, st)
			}
		}
	}
	return st.Render(fit(w, forms...))
}

// eighths lets the bar move in steps of an eighth of a cell, so a short
// countdown drains smoothly at 10 frames a second.
var eighths = []string{"", "▏", "▎", "▍", "▌", "▋", "▊", "▉"}

func (m *Model) bar(frac float64, w int, full lipgloss.Style) string {
	frac = math.Max(0, math.Min(1, frac))
	units := int(math.Round(frac * float64(w*8)))
	cells := units / 8
	var b strings.Builder
	b.WriteString(strings.Repeat("█", cells))
	used := cells
	if rem := units % 8; rem > 0 {
		b.WriteString(eighths[rem])
		used++
	}
	return full.Render(b.String()) + m.styles.barOff.Render(strings.Repeat("░", w-used))
}

func errType(e *event.Error) string {
	if e == nil || e.Type == "" {
		return "error"
	}
	return e.Type
}

// errMessage is the error's message on one line.
func errMessage(e *event.Error) string {
	if e == nil {
		return ""
	}
	return strings.Join(strings.Fields(e.Message), " ")
}

// errText is "type: message", on one line.
func errText(e *event.Error) string {
	if msg := errMessage(e); msg != "" {
		return errType(e) + ": " + msg
	}
	return errType(e)
}

// reasonText is the failure reason, spelled as in the JSON events, wf
// state show and the docs (non_retryable, max_attempts, ...).
func reasonText(reason string) string {
	if reason == "" {
		return ""
	}
	return " (" + reason + ")"
}

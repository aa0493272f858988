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
// empty so the output is plain text.
type styles struct {
	title, dim, sel, ok, bad, warn, run, wait, barFull, barEmpty lipgloss.Style
}

func newStyles(color bool) styles {
	if !color {
		return styles{}
	}
	return styles{
		title:    lipgloss.NewStyle().Bold(true),
		dim:      lipgloss.NewStyle().Foreground(lipgloss.Color("8")),
		sel:      lipgloss.NewStyle().Bold(true).Foreground(lipgloss.Color("12")),
		ok:       lipgloss.NewStyle().Foreground(lipgloss.Color("2")),
		bad:      lipgloss.NewStyle().Foreground(lipgloss.Color("1")),
		warn:     lipgloss.NewStyle().Foreground(lipgloss.Color("3")),
		run:      lipgloss.NewStyle().Foreground(lipgloss.Color("6")),
		wait:     lipgloss.NewStyle().Foreground(lipgloss.Color("5")),
		barFull:  lipgloss.NewStyle().Foreground(lipgloss.Color("5")),
		barEmpty: lipgloss.NewStyle().Foreground(lipgloss.Color("8")),
	}
}

// spinnerFrames comes from bubbles; the frame is derived from the clock
// rather than from the spinner's own tick so that one tick drives the
// whole dashboard (and stops when nothing is live).
var spinnerFrames = spinner.MiniDot

// layout is how many lines each part of the dashboard gets.
type layout struct {
	header  int // title, counts, budgets, notice
	budgets int
	rows    int
	log     int
}

func (m *Model) layout() layout {
	var l layout
	l.budgets = min(len(m.budgets), max(1, m.height/8))
	l.header = 2 + l.budgets
	if m.notice != "" {
		l.header++
	}
	// Two separators and the help line.
	free := m.height - l.header - 3
	l.log = min(len(m.log), max(2, free/4), 12)
	l.rows = max(1, free-l.log)
	if len(m.rows) < l.rows {
		l.rows = len(m.rows)
		// Give what the rows do not need to the log.
		l.log = min(len(m.log), max(0, free-l.rows))
	}
	return l
}

// View implements tea.Model. The dashboard renders inline (not in the
// alternate screen) so that the last frame stays in the terminal.
func (m *Model) View() tea.View {
	return tea.NewView(m.Render())
}

// Render returns the current frame as a string.
func (m *Model) Render() string {
	w := max(20, m.width)
	var lines []string
	if m.detail {
		lines = m.renderHistory(w)
	} else {
		lines = m.renderDashboard(w)
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
	var out []string

	title := m.opts.Title
	if len(m.instances) > 0 {
		title += " · " + strings.Join(m.instances, ", ")
	}
	right := fmt.Sprintf("attempts %d · retries %d · elapsed %s", m.attempts, m.retries, fmtDur(m.elapsed()))
	if m.final.Completed {
		right = m.final.Status + " · " + right
	}
	out = append(out, spread(s.title.Render(title), s.dim.Render(right), w))

	var running, waiting, pending, succeeded, failed, skipped, unchanged int
	for _, r := range m.rows {
		switch r.st {
		case stRunning, stAttemptFailed:
			running++
		case stRetryWait, stBudgetWait, stSleeping:
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
	counts := []string{
		s.run.Render(fmt.Sprintf("running %d", running)),
		s.wait.Render(fmt.Sprintf("waiting %d", waiting)),
		s.ok.Render(fmt.Sprintf("succeeded %d", succeeded)),
		s.bad.Render(fmt.Sprintf("failed %d", failed)),
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

	for _, b := range m.budgets[:l.budgets] {
		out = append(out, m.renderBudget(b, w))
	}
	if m.notice != "" {
		out = append(out, s.warn.Render(m.notice))
	}

	label := "activities"
	if len(m.rows) > l.rows {
		label = fmt.Sprintf("activities %d-%d of %d", m.offset+1, min(len(m.rows), m.offset+l.rows), len(m.rows))
	}
	out = append(out, separator(label, w, s))

	cols := m.columns(w)
	for i := m.offset; i < len(m.rows) && i < m.offset+l.rows; i++ {
		out = append(out, m.renderRow(m.rows[i], i == m.selected, cols))
	}

	out = append(out, separator("events", w, s))
	for _, e := range m.log[len(m.log)-l.log:] {
		out = append(out, s.dim.Render(m.logLine(e)))
	}
	out = append(out, m.helpLine(false))
	return out
}

func (m *Model) renderBudget(b event.BudgetUsage, w int) string {
	s := m.styles
	frac := 0.0
	if b.MaxRetries > 0 {
		frac = float64(b.Used) / float64(b.MaxRetries)
	}
	barW := min(30, max(10, w/5))
	text := fmt.Sprintf("%d/%d retries per %s", b.Used, b.MaxRetries, fmtDur(time.Duration(b.WindowMs)*time.Millisecond))
	st := s.ok
	if frac >= 1 {
		st = s.bad
	} else if frac >= 0.8 {
		st = s.warn
	}
	return fmt.Sprintf("budget %s %s %s", b.Name, m.bar(frac, barW, st), text)
}

// columns are the widths of a row's fields for a window width.
type columns struct {
	name, kind, attempt, detail int
	qualify                     bool
}

func (m *Model) columns(w int) columns {
	c := columns{kind: 5, attempt: 13, qualify: len(m.instances) > 1}
	longest := 4
	for _, r := range m.rows {
		longest = max(longest, lipgloss.Width(m.displayName(r, c.qualify)))
	}
	c.name = min(longest, max(12, w/5))
	// "> " + symbol + " " + name + " " + kind + " " + attempt + " " + detail
	c.detail = max(10, w-4-c.name-1-c.kind-1-c.attempt-1)
	return c
}

func (m *Model) displayName(r *row, qualify bool) string {
	if qualify {
		return r.instance + " " + shortName(r.activity)
	}
	return shortName(r.activity)
}

func (m *Model) renderRow(r *row, selected bool, c columns) string {
	s := m.styles
	cursor := "  "
	name := pad(ansi.Truncate(m.displayName(r, c.qualify), c.name, "…"), c.name)
	if selected {
		cursor = s.sel.Render("> ")
		name = s.sel.Render(name)
	}
	sym, detail := m.describe(r, c.detail)
	return cursor + sym + " " + name + " " + pad(ansi.Truncate(r.kind, c.kind, "…"), c.kind) + " " +
		pad(attemptText(r), c.attempt) + " " + detail
}

func attemptText(r *row) string {
	if r.attempt == 0 {
		return ""
	}
	limit := "∞"
	if r.maxAttempts > 0 {
		limit = fmt.Sprint(r.maxAttempts)
	}
	return fmt.Sprintf("attempt %d/%s", r.attempt, limit)
}

// describe returns a row's symbol and what it is doing.
func (m *Model) describe(r *row, w int) (string, string) {
	s := m.styles
	switch r.st {
	case stRunning:
		frame := spinnerFrames.Frames[int(m.now.UnixMilli()/spinnerFrames.FPS.Milliseconds())%len(spinnerFrames.Frames)]
		return s.run.Render(frame), s.run.Render("running " + fmtDur(m.now.Sub(r.started)))
	case stAttemptFailed:
		return s.warn.Render("!"), s.warn.Render(fmt.Sprintf("attempt %d failed (%s)", r.attempt, errType(r.err)))
	case stRetryWait:
		left := r.fireAt.Sub(m.now)
		text := fmt.Sprintf("retry %d in %s", r.attempt+1, fmtDur(left))
		if left <= 0 {
			text = fmt.Sprintf("retry %d now", r.attempt+1)
		}
		if r.waitSrc == "server" {
			text += " (server asked)"
		}
		return s.wait.Render("◌"), m.withBar(s.wait.Render(text), r, w)
	case stBudgetWait:
		text := "waiting for budget " + r.budget
		if left := r.fireAt.Sub(m.now); !r.fireAt.IsZero() && left > 0 {
			text += " · frees in " + fmtDur(left)
		}
		return s.warn.Render("⏸"), s.warn.Render(text)
	case stSleeping:
		if r.fireAt.IsZero() {
			return s.wait.Render("◔"), s.wait.Render("sleeping " + fmtDur(m.now.Sub(r.started)))
		}
		return s.wait.Render("◔"), m.withBar(s.wait.Render("sleeping "+fmtDur(r.fireAt.Sub(m.now))+" left"), r, w)
	case stSucceeded:
		n := "1 attempt"
		if r.attempt != 1 {
			n = fmt.Sprintf("%d attempts", r.attempt)
		}
		return s.ok.Render("✓"), s.ok.Render(fmt.Sprintf("succeeded after %s in %s", n, fmtDur(r.duration)))
	case stFailed:
		return s.bad.Render("✗"), s.bad.Render("failed: " + errType(r.err) + reasonText(r.reason))
	case stSkipped:
		why := "upstream failed"
		if r.reason != "" && r.reason != event.ReasonUpstreamFailed {
			why = r.reason
		}
		return s.dim.Render("⊘"), s.dim.Render("skipped (" + why + ")")
	case stUnchanged:
		return s.dim.Render("="), s.dim.Render("unchanged")
	}
	return s.dim.Render("…"), s.dim.Render(pendingText(r))
}

func pendingText(r *row) string {
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

// withBar appends a draining countdown bar when there is room for one.
func (m *Model) withBar(text string, r *row, w int) string {
	barW := min(24, w-lipgloss.Width(text)-1)
	if barW < 6 || r.waitTotal <= 0 {
		return text
	}
	frac := float64(r.fireAt.Sub(m.now)) / float64(r.waitTotal)
	return text + " " + m.bar(frac, barW, m.styles.barFull)
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
	return full.Render(b.String()) + m.styles.barEmpty.Render(strings.Repeat("░", w-used))
}

func errType(e *event.Error) string {
	if e == nil || e.Type == "" {
		return "error"
	}
	return e.Type
}

func reasonText(reason string) string {
	switch reason {
	case event.ReasonNonRetryable:
		return " (non-retryable)"
	case event.ReasonMaxAttempts:
		return " (max attempts)"
	case event.ReasonExpired:
		return " (expired)"
	case event.ReasonRetryIf:
		return " (retry_if false)"
	case event.ReasonBudgetExhausted:
		return " (budget exhausted)"
	case "":
		return ""
	}
	return " (" + reason + ")"
}

func (m *Model) helpLine(detail bool) string {
	k := m.keys
	binds := []struct{ k, d string }{
		{k.Up.Help().Key + " " + k.Down.Help().Key, "select"},
		{k.Enter.Help().Key, k.Enter.Help().Desc},
	}
	if detail {
		binds = []struct{ k, d string }{{k.Back.Help().Key, k.Back.Help().Desc}}
	}
	if m.opts.Controller != nil {
		binds = append(binds, struct{ k, d string }{k.Fire.Help().Key, k.Fire.Help().Desc})
	}
	binds = append(binds, struct{ k, d string }{k.Quit.Help().Key, k.Quit.Help().Desc})
	if !m.opts.ReadOnly && m.opts.Controller != nil {
		binds = append(binds, struct{ k, d string }{k.Interrupt.Help().Key, k.Interrupt.Help().Desc})
	}
	parts := make([]string, len(binds))
	for i, b := range binds {
		parts[i] = b.k + " " + m.styles.dim.Render(b.d)
	}
	return strings.Join(parts, m.styles.dim.Render(" · "))
}

func (m *Model) renderHistory(w int) []string {
	s := m.styles
	r := m.selectedRow()
	if r == nil {
		return []string{m.helpLine(true)}
	}
	sym, detail := m.describe(r, w/2)
	out := []string{
		s.title.Render(fmt.Sprintf("%s · %s · %s", r.activity, r.instance, r.kind)),
		sym + " " + attemptText(r) + "  " + detail,
		separator("attempts", w, s),
		s.dim.Render(fmt.Sprintf("%-4s %-12s %-9s %-10s %-28s %s", "#", "start", "duration", "outcome", "error", "wait")),
	}
	room := max(1, m.height-len(out)-2)
	hist := r.history
	if len(hist) > room {
		hist = hist[len(hist)-room:]
	}
	for _, a := range hist {
		start, dur, outcome := "", "", "running"
		if !a.start.IsZero() {
			start = a.start.Format("15:04:05.000")
		}
		switch {
		case a.ended && !a.start.IsZero():
			dur = fmtDur(a.end.Sub(a.start))
		case !a.ended && !a.start.IsZero():
			dur = fmtDur(m.now.Sub(a.start))
		}
		errText := ""
		if a.ended {
			outcome = "succeeded"
			if !a.succeeded {
				outcome = "failed"
				errText = errType(a.err)
				if a.err != nil && a.err.Message != "" {
					errText += ": " + a.err.Message
				}
			}
		}
		wait := ""
		if a.hasWait {
			wait = fmtDur(a.wait)
			if a.waitSrc != "" {
				wait += " (" + a.waitSrc + ")"
			}
		}
		out = append(out, fmt.Sprintf("%-4d %-12s %-9s %-10s %-28s %s", a.n, start, dur, outcome,
			ansi.Truncate(errText, 28, "…"), wait))
	}
	if len(r.history) == 0 {
		out = append(out, s.dim.Render("no attempts yet"))
	}
	out = append(out, separator("", w, s), m.helpLine(true))
	return out
}

// logLine formats an event as the plain line wf apply prints without a
// terminal.
func (m *Model) logLine(e logEntry) string {
	ev := e.ev
	who := ev.Activity
	if len(m.instances) > 1 && ev.Instance != "" {
		who = ev.Instance + " " + who
	}
	var text string
	switch ev.Type {
	case event.Plan:
		if ev.Attempt == 1 {
			return ev.Instance + ": plan: 1 activity"
		}
		return fmt.Sprintf("%s: plan: %d activities", ev.Instance, ev.Attempt)
	case event.AttemptStarted:
		text = fmt.Sprintf("attempt %d started", ev.Attempt)
	case event.AttemptSucceeded:
		text = fmt.Sprintf("attempt %d succeeded", ev.Attempt)
		if ev.DurationMs != nil {
			text += " in " + fmtDur(time.Duration(*ev.DurationMs)*time.Millisecond)
		}
	case event.AttemptFailed:
		text = fmt.Sprintf("attempt %d failed (%s)", ev.Attempt, errType(ev.Error))
		if e.follow != nil {
			text += "; " + retryText(e.follow)
		}
	case event.RetryScheduled:
		text = retryText(&ev)
	case event.TimerRecovered:
		text = "timer recovered"
		if ev.FireAt != nil {
			text += ", due in " + fmtDur(ev.FireAt.Sub(ev.Time))
		}
	case event.BudgetWait:
		text = "waiting for budget"
		if ev.Budget != nil {
			text += fmt.Sprintf(" %s (%d/%d used)", ev.Budget.Name, ev.Budget.Used, ev.Budget.MaxRetries)
		}
	case event.ActivitySucceeded:
		text = "succeeded"
		if ev.DurationMs != nil {
			text += " in " + fmtDur(time.Duration(*ev.DurationMs)*time.Millisecond)
		}
	case event.ActivityFailed:
		text = "failed: " + errType(ev.Error) + reasonText(ev.Reason)
	case event.ActivitySkipped:
		text = "skipped (upstream failed)"
	case event.RunCompleted:
		text = "run " + ev.Status
		if sm := ev.Summary; sm != nil {
			text += fmt.Sprintf(": %d succeeded, %d failed, %d skipped, %d unchanged; %d attempts, %d retries",
				sm.Succeeded, sm.Failed, sm.Skipped, sm.Unchanged, sm.Attempts, sm.Retries)
		}
		return text
	default:
		text = string(ev.Type)
	}
	return who + ": " + text
}

func retryText(ev *event.Event) string {
	if ev.DelaySource == "manual" {
		return fmt.Sprintf("retry %d fired now", ev.Attempt)
	}
	var d time.Duration
	if ev.DelayMs != nil {
		d = time.Duration(*ev.DelayMs) * time.Millisecond
	} else if ev.FireAt != nil {
		d = ev.FireAt.Sub(ev.Time)
	}
	text := fmt.Sprintf("retry %d in %s", ev.Attempt, fmtDur(d))
	if ev.DelaySource == "server" {
		text += " (server asked)"
	}
	return text
}

// fmtDur prints durations the way the rows want them: tenths of a second
// below a minute (so countdowns move every frame), then minutes and
// seconds, then hours and minutes.
func fmtDur(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	switch {
	case d < time.Minute:
		// Round to tenths so a timer set to 2.4s reads 2.4s, not 2.3s.
		return fmt.Sprintf("%.1fs", math.Round(d.Seconds()*10)/10)
	case d < time.Hour:
		mins, secs := int(d/time.Minute), int((d%time.Minute)/time.Second)
		if secs == 0 {
			return fmt.Sprintf("%dm", mins)
		}
		return fmt.Sprintf("%dm%02ds", mins, secs)
	default:
		h, mins := int(d/time.Hour), int((d%time.Hour)/time.Minute)
		return fmt.Sprintf("%dh%02dm", h, mins)
	}
}

// pad right-pads s with spaces to width cells.
func pad(s string, width int) string {
	if n := lipgloss.Width(s); n < width {
		return s + strings.Repeat(" ", width-n)
	}
	return s
}

// spread puts left and right on one line of width w.
func spread(left, right string, w int) string {
	gap := w - lipgloss.Width(left) - lipgloss.Width(right)
	if gap < 2 {
		return left + "  " + right
	}
	return left + strings.Repeat(" ", gap) + right
}

func separator(label string, w int, s styles) string {
	if label == "" {
		return s.dim.Render(strings.Repeat("─", w))
	}
	head := "── " + label + " "
	return s.dim.Render(head + strings.Repeat("─", max(0, w-lipgloss.Width(head))))
}

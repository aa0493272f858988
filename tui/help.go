package tui

import (
	"strings"

	"github.com/charmbracelet/x/ansi"
)

// hint is one key in the footer: shown when it fits, the lowest prio
// numbers first.
type hint struct {
	key, what string
	prio      int
}

// footer is the last line: the filter being typed, or the keys of the
// current screen that fit.
func (m *Model) footer(w int) string {
	s := m.styles
	if m.filter.editing {
		line := "/" + m.filter.text + "▏"
		return s.key.Render(line) + s.dim.Render(fit(w-width(line), "  enter keeps it · esc clears · name, kind, state or error type; !word excludes", "  enter keeps · esc clears", ""))
	}
	var hints []hint
	switch m.screen {
	case screenMain:
		quit := hint{"q", "stop (wf apply resumes)", 0}
		if m.readOnly() {
			quit = hint{"q", "quit (the apply goes on)", 0}
		}
		hints = []hint{
			{"↑↓", "select", 5}, {"enter", "history", 2}, {"l", "logs", 2}, {"e", "error", 3},
			{"/", "filter", 3}, {"tab", "events", 6}, {"r", "retry now", 2}, quit,
		}
		if !m.readOnly() {
			hints = append(hints, hint{"ctrl+c", "interrupt", 7})
		}
	case screenHistory:
		hints = []hint{{"↑↓", "attempt", 1}, {"l", "logs", 0}, {"e", "error", 1}, {"r", "retry now", 2}, {"esc", "back", 0}}
	case screenLogs:
		hints = []hint{{"↑↓ pgup pgdn", "scroll", 1}, {"←→", "attempt", 0}, {"e", "error", 2}, {"esc", "back", 0}}
	case screenError:
		hints = []hint{{"↑↓ pgup pgdn", "scroll", 1}, {"l", "logs", 1}, {"esc", "back", 0}}
	}
	hints = append(hints, hint{"?", "help", 0})
	return m.renderHints(hints, w)
}

// renderHints joins the hints that fit in w, dropping the least needed.
func (m *Model) renderHints(hints []hint, w int) string {
	s := m.styles
	for limit := 9; limit >= 0; limit-- {
		var plain, styled []string
		for _, h := range hints {
			if h.prio <= limit {
				plain = append(plain, h.key+" "+h.what)
				styled = append(styled, s.key.Render(h.key)+" "+s.dim.Render(h.what))
			}
		}
		if width(strings.Join(plain, " · ")) <= w || limit == 0 {
			return strings.Join(styled, s.dim.Render(" · "))
		}
	}
	return ""
}

// helpLines lists every key, for the ? overlay.
func (m *Model) helpLines() [][2]string {
	quit := [][2]string{
		{"q", "stop: no new attempts, running ones finish, state is saved, wf apply exits 130; run wf apply again to resume. In the other views q goes back."},
		{"ctrl+c", "the same as q; a second ctrl+c cancels the running attempts (recorded as interrupted)"},
	}
	if m.readOnly() {
		quit = [][2]string{
			{"q", "close this view; the apply goes on (in the other views q goes back)"},
			{"ctrl+c", "close this view; the apply goes on"},
		}
	}
	lines := [][2]string{
		{"↑ ↓  k j", "select an activity; scroll the event log (after tab) or a view"},
		{"pgup pgdown", "a page up or down (also ctrl+b, ctrl+f, space)"},
		{"home end  g G", "first, last"},
		{"tab", "switch between the activities and the event log"},
		{"/", "filter by name, kind, state or error type; !word excludes"},
		{"esc backspace", "clear the filter, or go back"},
		{"enter", "attempt history of the selected activity"},
		{"l", "captured stdout/stderr of the selected attempt"},
		{"e", "the whole error of the selected activity"},
		{"← →  [ ]", "previous, next attempt (logs)"},
		{"r", "fire the selected pending retry now"},
	}
	lines = append(lines, quit...)
	return append(lines,
		[2]string{"?", "this help (esc closes it)"},
		[2]string{"mouse", "the wheel scrolls, a click selects"},
		[2]string{"states", "running waiting retry budget circuit sleeping pending succeeded failed skipped unchanged; live = running or waiting, done = finished"},
		[2]string{"", "If a killed dashboard leaves the terminal odd (mouse, cursor), run reset."},
	)
}

// overlayHelp draws the key list in a box over the frame.
func (m *Model) overlayHelp(base []string, w int) []string {
	s := m.styles
	boxW := min(w, 84)
	inner := boxW - 4
	keyW := 14
	var body []string
	for _, l := range m.helpLines() {
		if l[0] == "" {
			for _, t := range wrap(l[1], inner) {
				body = append(body, s.dim.Render(t))
			}
			continue
		}
		for i, t := range wrap(l[1], inner-keyW) {
			k := ""
			if i == 0 {
				k = l[0]
			}
			body = append(body, s.key.Render(pad(k, keyW))+t)
		}
	}
	h := max(3, m.height)
	room := max(1, h-2)
	m.scroll = max(0, min(m.scroll, len(body)-room))
	title := "keys"
	if len(body) > room {
		title = "keys · ↑↓ scroll"
		body = body[m.scroll : m.scroll+room]
	}
	box := make([]string, 0, len(body)+2)
	box = append(box, s.focus.Render("╭─ "+title+" "+strings.Repeat("─", max(0, boxW-width(title)-5))+"╮"))
	for _, b := range body {
		box = append(box, s.focus.Render("│")+" "+pad(b, inner)+" "+s.focus.Render("│"))
	}
	box = append(box, s.focus.Render("╰"+strings.Repeat("─", boxW-2)+"╯"))

	out := append([]string(nil), base...)
	for len(out) < min(h, len(box)) {
		out = append(out, "")
	}
	top := max(0, (len(out)-len(box))/2)
	left := (w - boxW) / 2
	for i, b := range box {
		y := top + i
		if y >= len(out) {
			out = append(out, "")
		}
		line := pad(out[y], w)
		out[y] = ansi.Truncate(line, left, "") + b + ansi.TruncateLeft(line, left+boxW, "")
	}
	return out
}

package tui

import (
	"fmt"
	"math"
	"strings"
	"time"

	"charm.land/lipgloss/v2"
	"github.com/charmbracelet/x/ansi"
)

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

// fmtBytes prints a size as people read it: 812 B, 4.0 KiB, 1.2 MiB.
func fmtBytes(n int) string {
	switch {
	case n < 1<<10:
		return fmt.Sprintf("%d B", n)
	case n < 1<<20:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	default:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	}
}

// width is the number of terminal cells s takes.
func width(s string) int { return ansi.StringWidth(s) }

// pad right-pads s with spaces to w cells.
func pad(s string, w int) string {
	if n := lipgloss.Width(s); n < w {
		return s + strings.Repeat(" ", w-n)
	}
	return s
}

// fit returns the first of forms (longest and most telling first) that
// fits in w cells; when none does, the last one cut at the end. Views list
// shorter forms that keep the key part of a message ("frees in 3.0s"), so
// that a narrow window drops the decoration, not the point.
func fit(w int, forms ...string) string {
	for _, f := range forms {
		if width(f) <= w {
			return f
		}
	}
	if len(forms) == 0 {
		return ""
	}
	return ansi.Truncate(forms[len(forms)-1], max(0, w), "…")
}

// truncMiddle cuts s to w cells keeping its start and its end, which is
// where names differ ("notify_custo…long_name").
func truncMiddle(s string, w int) string {
	n := width(s)
	if n <= w {
		return s
	}
	if w <= 1 {
		return ansi.Truncate(s, w, "")
	}
	left := (w - 1 + 1) / 2
	right := w - 1 - left
	return ansi.Truncate(s, left, "") + "…" + ansi.TruncateLeft(s, n-right, "")
}

// wrap breaks plain text into lines of at most w cells, at spaces where
// it can and anywhere it must, keeping the text's own line breaks.
func wrap(s string, w int) []string {
	w = max(1, w)
	var out []string
	for _, line := range strings.Split(s, "\n") {
		if width(line) <= w {
			out = append(out, line)
			continue
		}
		out = append(out, strings.Split(ansi.Wrap(line, w, ""), "\n")...)
	}
	return out
}

// sanitize makes captured output safe to draw: escape sequences and
// control characters out, tabs expanded, carriage returns honoured the
// way a terminal would show the last write of a line.
func sanitize(s string) string {
	s = ansi.Strip(s)
	var b strings.Builder
	b.Grow(len(s))
	for _, line := range strings.Split(s, "\n") {
		if i := strings.LastIndexByte(strings.TrimRight(line, "\r"), '\r'); i >= 0 {
			line = line[i+1:]
		}
		col := 0
		for _, r := range line {
			switch {
			case r == '\t':
				n := 4 - col%4
				b.WriteString(strings.Repeat(" ", n))
				col += n
			case r < 0x20 || r == 0x7f:
			default:
				b.WriteRune(r)
				col++
			}
		}
		b.WriteByte('\n')
	}
	return strings.TrimSuffix(b.String(), "\n")
}

func separator(label string, w int, st lipgloss.Style) string {
	if label == "" {
		return st.Render(strings.Repeat("─", w))
	}
	head := "── " + label + " "
	return st.Render(head + strings.Repeat("─", max(0, w-width(head))))
}

// joinFit joins parts with sep, dropping parts from the end of the
// optional ones (those after keep) until the line fits in w cells.
func joinFit(w int, sep string, keep int, parts ...string) string {
	for n := len(parts); n > keep; n-- {
		if s := strings.Join(parts[:n], sep); width(s) <= w {
			return s
		}
	}
	return strings.Join(parts[:min(keep, len(parts))], sep)
}

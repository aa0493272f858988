package tui

// One row of the dashboard: an activity's name, kind, attempt, its trail
// of earlier attempts and what it is doing now, fitted to the window.

import (
	"fmt"
	"math"
	"strings"

	"charm.land/lipgloss/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/wf-engine/wf/executor/event"
)

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

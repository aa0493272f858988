package tui

import (
	"fmt"
	"strings"

	"github.com/charmbracelet/x/ansi"

	"github.com/wf-engine/wf/executor/event"
)

// The detail screens (history, logs, error) share one frame: two lines
// about the activity, a body that scrolls, a position line and the keys.

// pagerHeight is how many body lines a detail screen shows.
func (m *Model) pagerHeight() int { return max(1, m.height-5) }

// pager frames body, shown from m.scroll (clamped here, where the body's
// length is known).
func (m *Model) pager(w int, head []string, label string, body []string) []string {
	s := m.styles
	room := m.pagerHeight()
	m.scroll = max(0, min(m.scroll, len(body)-room))
	out := append(head, separator(label, w, s.dim))
	end := min(len(body), m.scroll+room)
	out = append(out, body[m.scroll:end]...)
	pos := ""
	if len(body) > room {
		pos = fmt.Sprintf("lines %d-%d of %d", m.scroll+1, end, len(body))
	}
	return append(out, separator(pos, w, s.dim), m.footer(w))
}

// rowHead is the two lines about the selected activity.
func (m *Model) rowHead(r *row, w int, what string) []string {
	s := m.styles
	sym, detail := m.describe(r, max(10, w-width(r.attemptText())-4))
	title := fmt.Sprintf("%s · %s · %s", r.activity, r.instance, r.kind)
	if what != "" {
		title += " · " + what
	}
	return []string{s.title.Render(fit(w, title, r.activity+" · "+what)), sym + " " + r.attemptText() + "  " + detail}
}

func (m *Model) renderHistory(w int) []string {
	s := m.styles
	r := m.selectedRow()
	if r == nil {
		return []string{m.footer(w)}
	}
	head := m.rowHead(r, w, "")
	room := m.pagerHeight() - 1
	sel := m.attemptIdx(r)
	// Keep the selected attempt in view.
	if sel < m.scroll {
		m.scroll = max(0, sel)
	}
	if sel >= m.scroll+room {
		m.scroll = sel - room + 1
	}
	m.scroll = max(0, min(m.scroll, len(r.history)-room))
	const fixed = 2 + 4 + 13 + 9 + 12 + 18
	errW := max(12, w-fixed)
	body := []string{s.dim.Render(fmt.Sprintf("  %-4s%-13s%-9s%-12s%-*s %s", "#", "start", "duration", "outcome", errW, "error", "wait"))}
	end := min(len(r.history), m.scroll+room)
	for i := m.scroll; i < end; i++ {
		a := r.history[i]
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
		errStr, st := "", s.run
		if a.ended {
			outcome, st = "succeeded", s.ok
			if !a.succeeded {
				outcome, st = "failed", s.warn
				if a.err != nil && a.err.Type == errInterrupted {
					outcome = errInterrupted
				}
				errStr = errText(a.err)
			}
		}
		wait := ""
		if a.hasWait {
			wait = fmtDur(a.wait)
			if a.waitSrc != "" {
				wait += " (" + a.waitSrc + ")"
			}
		}
		cursor := "  "
		if i == sel {
			cursor = s.sel.Render("> ")
		}
		body = append(body, cursor+fmt.Sprintf("%-4d%-13s%-9s", a.n, start, dur)+st.Render(pad(outcome, 11))+" "+
			pad(ansi.Truncate(errStr, errW, "…"), errW)+" "+wait)
	}
	if len(r.history) == 0 {
		body = append(body, s.dim.Render("  no attempts yet"))
	}
	label := "attempts"
	if len(r.history) > room {
		label = fmt.Sprintf("attempts %d-%d of %d", m.scroll+1, end, len(r.history))
	}
	out := append(head, separator(label, w, s.dim))
	out = append(out, body...)
	return append(out, separator("", w, s.dim), m.footer(w))
}

func (m *Model) renderLogs(w int) []string {
	s := m.styles
	r := m.selectedRow()
	if r == nil {
		return []string{m.footer(w)}
	}
	if len(r.history) == 0 {
		return m.pager(w, m.rowHead(r, w, "output"), "output", []string{s.dim.Render("no attempts yet")})
	}
	idx := m.attemptIdx(r)
	a := r.history[idx]
	what := fmt.Sprintf("attempt %d (%d of %d)", a.n, idx+1, len(r.history))
	head := m.rowHead(r, w, what+" output")
	var body []string
	switch {
	case !a.ended:
		body = wrap(fmt.Sprintf("attempt %d is still running: what it prints shows here when it ends.", a.n), w)
	case a.dropped:
		body = wrap(fmt.Sprintf("the dashboard keeps the output of the last %d attempts only; attempt %d's is gone from here.", outputKeep, a.n), w)
	case a.output == nil:
		body = wrap(fmt.Sprintf("attempt %d printed nothing, or nothing was captured (a sleep, or an attempt the engine's stop interrupted).", a.n), w)
	default:
		o := a.output
		streams := []struct {
			name string
			text string
			size int
		}{{"stdout", o.Stdout, o.StdoutBytes}, {"stderr", o.Stderr, o.StderrBytes}}
		if r.kind == "http" || o.Body != "" {
			streams = []struct {
				name string
				text string
				size int
			}{{"response body", o.Body, o.BodyBytes}}
		}
		for _, st := range streams {
			label := st.name + " · empty"
			if st.size > 0 {
				label = st.name + " · " + fmtBytes(st.size)
				if len(st.text) < st.size {
					label = fmt.Sprintf("%s · the last %s of %s", st.name, fmtBytes(len(st.text)), fmtBytes(st.size))
				}
			}
			body = append(body, s.title.Render(label))
			if st.text != "" {
				body = append(body, wrap(sanitize(strings.TrimSuffix(st.text, "\n")), w)...)
			}
		}
	}
	outcome := "running"
	if a.ended {
		outcome = "succeeded"
		if !a.succeeded {
			outcome = "failed (" + errType(a.err) + ")"
		}
	}
	return m.pager(w, head, fmt.Sprintf("attempt %d · %s", a.n, outcome), body)
}

// reasonLong says why an activity failed for good.
func reasonLong(reason string, e *event.Error) string {
	switch reason {
	case event.ReasonNonRetryable:
		if e != nil && e.NonRetryable {
			return "the activity flagged the error as not retryable"
		}
		return "a non_retryable_errors pattern matches the error, it is outside retryable_errors, or no retry rule matches it"
	case event.ReasonMaxAttempts:
		return "the retry rule's maximum_attempts is used up"
	case event.ReasonExpired:
		return "the next attempt would start after the rule's expiration"
	case event.ReasonRetryIf:
		return "retry_if said no (or could not be evaluated)"
	case event.ReasonBudgetExhausted:
		return "the retry budget is spent and on_exhausted is \"fail\""
	case event.ReasonUpstreamFailed:
		return "an upstream activity failed"
	}
	return reason
}

func (m *Model) renderError(w int) []string {
	s := m.styles
	r := m.selectedRow()
	if r == nil {
		return []string{m.footer(w)}
	}
	head := m.rowHead(r, w, "error")
	field := func(name, value string) []string {
		var out []string
		for i, l := range wrap(value, w-14) {
			if i == 0 {
				out = append(out, s.key.Render(pad(name, 14))+l)
			} else {
				out = append(out, pad("", 14)+l)
			}
		}
		return out
	}
	var body []string
	last := -1 // the attempt whose error is shown first
	for i := len(r.history) - 1; i >= 0; i-- {
		if a := r.history[i]; a.ended && !a.succeeded {
			last = i
			break
		}
	}
	e := r.err
	if e == nil && last >= 0 && r.st != stSucceeded && r.st != stRunning {
		e = r.history[last].err
	}
	switch {
	case e != nil:
		body = append(body, field("type", errType(e))...)
		flag := "no"
		if e.NonRetryable {
			flag = "yes: the activity flagged it"
		}
		body = append(body, field("non_retryable", flag)...)
		if r.st == stFailed && r.reason != "" {
			body = append(body, field("reason", r.reason+": "+reasonLong(r.reason, e))...)
		}
		if last >= 0 {
			body = append(body, field("attempt", fmt.Sprint(r.history[last].n))...)
		}
		body = append(body, s.key.Render("message"))
		if e.Message == "" {
			body = append(body, s.dim.Render("(none)"))
		} else {
			body = append(body, wrap(sanitize(e.Message), w)...)
		}
	case r.st == stSkipped:
		body = wrap("skipped: "+reasonLong(r.reason, nil)+"; it has no error of its own.", w)
	default:
		body = wrap(r.activity+" has no error.", w)
	}
	var earlier []string
	for i := len(r.history) - 1; i >= 0; i-- {
		a := r.history[i]
		if i == last && e != nil || !a.ended || a.succeeded {
			continue
		}
		earlier = append(earlier, s.warn.Render(fmt.Sprintf("attempt %d · %s", a.n, errType(a.err))))
		if msg := errMessage(a.err); msg != "" {
			for _, l := range wrap(sanitize(a.err.Message), w-2) {
				earlier = append(earlier, "  "+l)
			}
		}
	}
	if len(earlier) > 0 {
		body = append(body, "", s.title.Render("errors of earlier attempts, newest first"))
		body = append(body, earlier...)
	}
	return m.pager(w, head, "error", body)
}

package tui

import (
	"fmt"
	"strings"
	"time"

	"charm.land/lipgloss/v2"

	"github.com/wf-engine/wf/executor/event"
)

// renderLog draws the last n event log lines the filter lets through,
// logBack lines back from the newest. From 120 columns each line starts
// with the event's time.
func (m *Model) renderLog(w, n int) []string {
	if n <= 0 {
		return nil
	}
	picked := make([]*logEntry, 0, n)
	skip := m.logBack
	for i := len(m.log) - 1; i >= 0 && len(picked) < n; i-- {
		e := &m.log[i]
		if !m.shownEntry(e) {
			continue
		}
		if skip > 0 {
			skip--
			continue
		}
		picked = append(picked, e)
	}
	out := make([]string, 0, len(picked))
	for i := len(picked) - 1; i >= 0; i-- {
		out = append(out, m.renderLogLine(picked[i], w))
	}
	return out
}

func (m *Model) renderLogLine(e *logEntry, w int) string {
	s := m.styles
	who, texts, st := m.logParts(e)
	var ts string
	if w >= 120 && !e.ev.Time.IsZero() {
		ts = e.ev.Time.Format("15:04:05.000") + " "
	}
	room := w - width(ts)
	if who == "" {
		return s.dim.Render(ts) + st.Render(fit(room, texts...))
	}
	// The message is the point: shorten the name, then the wording,
	// before cutting anything.
	short := shortName(who)
	if len(m.instances) > 1 && e.ev.Instance != "" {
		short = e.ev.Instance + " " + shortName(e.ev.Activity)
	}
	line := ""
	for _, text := range texts {
		if l := fit(room, who+": "+text, short+": "+text); width(l) <= room && !strings.HasSuffix(l, "…") {
			line = l
			break
		}
		if nameW := room - width(text) - 2; nameW >= 8 {
			line = truncMiddle(short, nameW) + ": " + text
			break
		}
	}
	if line == "" {
		line = fit(room, short+": "+texts[len(texts)-1])
	}
	return s.dim.Render(ts) + st.Render(line)
}

// logParts is an event as the plain line wf apply prints without a
// terminal (who, what) and the colour it gets.
func (m *Model) logParts(e *logEntry) (who string, texts []string, st lipgloss.Style) {
	s := m.styles
	ev := e.ev
	who = ev.Activity
	if len(m.instances) > 1 && ev.Instance != "" {
		who = ev.Instance + " " + who
	}
	st = s.dim
	var text string
	var more []string // shorter wordings that keep the point
	switch ev.Type {
	case event.Plan:
		if len(ev.Activities) == 1 {
			return "", []string{ev.Instance + ": plan: 1 activity"}, st
		}
		return "", []string{fmt.Sprintf("%s: plan: %d activities", ev.Instance, len(ev.Activities))}, st
	case event.AttemptStarted:
		text = fmt.Sprintf("attempt %d started", ev.Attempt)
	case event.AttemptSucceeded:
		text = fmt.Sprintf("attempt %d succeeded", ev.Attempt)
		if ev.DurationMs != nil {
			text += " in " + fmtDur(time.Duration(*ev.DurationMs)*time.Millisecond)
		}
		st = s.ok
	case event.AttemptFailed:
		text = fmt.Sprintf("attempt %d failed (%s)", ev.Attempt, errType(ev.Error))
		if e.retry.attempt != 0 {
			retry := e.retry.text()
			text += "; " + retry
			more = []string{fmt.Sprintf("#%d failed (%s); %s", ev.Attempt, errType(ev.Error), retry),
				fmt.Sprintf("#%d %s; %s", ev.Attempt, errType(ev.Error), retry)}
		}
		st = s.warn
	case event.RetryScheduled:
		text = noteRetry(ev).text()
		st = s.warn
	case event.TimerRecovered:
		text = "timer recovered"
		if ev.FireAt != nil {
			text += ", due in " + fmtDur(ev.FireAt.Sub(ev.Time))
		}
		st = s.warn
	case event.BudgetWait:
		text = "waiting for budget"
		if ev.Budget != nil {
			text += fmt.Sprintf(" %s (%d/%d used)", ev.Budget.Name, ev.Budget.Used, ev.Budget.MaxRetries)
		}
		st = s.warn
	case event.ActivitySucceeded:
		text = "succeeded"
		if ev.DurationMs != nil {
			text += " in " + fmtDur(time.Duration(*ev.DurationMs)*time.Millisecond)
		}
		st = s.ok
	case event.ActivityFailed:
		text = "failed: " + errType(ev.Error) + reasonText(ev.Reason)
		st = s.bad
	case event.ActivitySkipped:
		text = "skipped (" + skipWhy(ev.Reason) + ")"
	case event.ActivityExpanded:
		text = fmt.Sprintf("for_each known: %d %s", len(ev.Activities), plural(len(ev.Activities), "element", "elements"))
	case event.ActivityMoved:
		text = "state moved from " + ev.From
	case event.ActivityRemoved:
		text = "removed; state forgotten"
		if ev.Error != nil {
			text += " (" + ev.Error.Message + ")"
		}
		st = s.warn
	case event.OutputKnown:
		return "", []string{outputLine(ev)}, st
	case event.RunCompleted:
		text = "run " + ev.Status
		forms := []string{text}
		if sm := ev.Summary; sm != nil {
			tries := fmt.Sprintf("; %d attempts, %d retries", sm.Attempts, sm.Retries)
			var some []string
			for _, c := range []struct {
				n    int
				what string
			}{{sm.Succeeded, "succeeded"}, {sm.Failed, "failed"}, {sm.Skipped, "skipped"}, {sm.Unchanged, "unchanged"}} {
				if c.n > 0 {
					some = append(some, fmt.Sprintf("%d %s", c.n, c.what))
				}
			}
			forms = []string{
				text + fmt.Sprintf(": %d succeeded, %d failed, %d skipped, %d unchanged", sm.Succeeded, sm.Failed, sm.Skipped, sm.Unchanged) + tries,
				text + ": " + strings.Join(some, ", ") + tries,
				text + tries,
				text,
			}
		}
		st = s.ok
		if ev.Status != event.StatusSucceeded {
			st = s.bad
		}
		return "", forms, st
	case event.CircuitOpened, event.CircuitHalfOpen, event.CircuitClosed, event.CircuitWait:
		return m.circuitLog(ev, who)
	default:
		text = string(ev.Type)
	}
	return who, append([]string{text}, more...), st
}

func (n retryNote) text() string {
	if n.source == "manual" {
		return fmt.Sprintf("retry %d fired now", n.attempt)
	}
	text := fmt.Sprintf("retry %d in %s", n.attempt, fmtDur(n.delay))
	switch n.source {
	case "server":
		text += " (server asked)"
	case "activity":
		text += " (activity asked)"
	}
	return text
}

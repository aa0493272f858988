package tui

import (
	"fmt"
	"time"

	"charm.land/lipgloss/v2"

	"github.com/wf-engine/wf/executor/event"
)

// Circuit breakers and heartbeats on the dashboard (SPEC §11): a badge per
// breaker under the budget gauges, with its state and the countdown to
// half-open; the row of an attempt waiting for its breaker; the time since
// a running attempt's last heartbeat.

// noteCircuit keeps the latest state of a breaker.
func (m *Model) noteCircuit(c event.CircuitInfo) {
	if i, ok := m.circuitIdx[c.Name]; ok {
		m.circuits[i] = c
		return
	}
	m.circuitIdx[c.Name] = len(m.circuits)
	m.circuits = append(m.circuits, c)
}

// circuit is the latest known state of a breaker.
func (m *Model) circuit(name string) (event.CircuitInfo, bool) {
	i, ok := m.circuitIdx[name]
	if !ok {
		return event.CircuitInfo{}, false
	}
	return m.circuits[i], true
}

// applyCircuit folds the breaker events into the model.
func (m *Model) applyCircuit(ev *event.Event) {
	for _, c := range ev.Circuits {
		m.noteCircuit(c)
	}
	if ev.Circuit != nil {
		m.noteCircuit(*ev.Circuit)
	}
}

// halfOpenLeft is how long an open breaker stays open; ok is false when
// it is not open or does not say.
func (m *Model) halfOpenLeft(c event.CircuitInfo) (time.Duration, bool) {
	if c.State != event.CircuitStateOpen || c.HalfOpenAt == nil {
		return 0, false
	}
	return max(c.HalfOpenAt.Sub(m.now), 0), true
}

// renderCircuit is one breaker's badge, e.g. "breaker payment_api ● open ·
// half-open in 12.0s".
func (m *Model) renderCircuit(c event.CircuitInfo, w int) string {
	s := m.styles
	st, state := s.ok, "closed"
	detail := ""
	switch c.State {
	case event.CircuitStateOpen:
		st, state = s.bad, "open"
		if left, ok := m.halfOpenLeft(c); ok {
			detail = "half-open in " + fmtDur(left)
		}
	case event.CircuitStateHalfOpen:
		st, state = s.warn, "half-open"
		detail = fmt.Sprintf("%d trial %s", max(c.HalfOpenCalls, 1), plural(max(c.HalfOpenCalls, 1), "call", "calls"))
	default:
		if c.Calls > 0 {
			detail = fmt.Sprintf("%d/%d failed", c.Failures, c.Calls)
		}
	}
	head := "breaker " + c.Name + " "
	badge := st.Render("● " + state)
	if detail == "" {
		return head + badge
	}
	return fit(w, head+badge+st.Render(" · "+detail), head+badge)
}

// describeCircuitWait is the row of an attempt waiting for its breaker:
// "waiting for circuit payment_api (open, half-open in 12s)".
func (m *Model) describeCircuitWait(r *row, w int) (string, string) {
	s := m.styles
	c, _ := m.circuit(r.breaker)
	why := "half-open, trial running"
	switch {
	case c.State == event.CircuitStateClosed:
		why = "closed, starting"
	case c.State == event.CircuitStateOpen:
		why = "open"
		if left, ok := m.halfOpenLeft(c); ok {
			why = "open, half-open in " + fmtDur(left)
		}
	}
	return s.bad.Render("⏸"), s.warn.Render(fit(w,
		fmt.Sprintf("waiting for circuit %s (%s)", r.breaker, why),
		fmt.Sprintf("circuit %s (%s)", r.breaker, why),
		"circuit "+why))
}

// beatNote is " · last beat 3.0s ago" for a running attempt that
// heartbeats, "" otherwise.
func (m *Model) beatNote(r *row) string {
	if r.lastBeat.IsZero() || r.lastBeat.Before(r.started) {
		return ""
	}
	return " · last beat " + fmtDur(max(m.now.Sub(r.lastBeat), 0)) + " ago"
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// circuitLog is the event log line of a breaker event.
func (m *Model) circuitLog(ev *event.Event, who string) (string, []string, lipgloss.Style) {
	s := m.styles
	c := ev.Circuit
	if c == nil {
		return "", []string{"breaker " + ev.Breaker + ": " + string(ev.Type)}, s.warn
	}
	switch ev.Type {
	case event.CircuitOpened:
		text := fmt.Sprintf("breaker %s opened: %d of %d calls failed", c.Name, c.Failures, c.Calls)
		if c.HalfOpenAt != nil {
			return "", []string{text + "; half-open in " + fmtDur(c.HalfOpenAt.Sub(ev.Time)), text}, s.bad
		}
		return "", []string{text}, s.bad
	case event.CircuitHalfOpen:
		return "", []string{"breaker " + c.Name + " half-open: trying again"}, s.warn
	case event.CircuitClosed:
		return "", []string{"breaker " + c.Name + " closed"}, s.ok
	}
	why := "half-open, trial running"
	if c.State == event.CircuitStateOpen && c.HalfOpenAt != nil {
		why = "open, half-open in " + fmtDur(c.HalfOpenAt.Sub(ev.Time))
	}
	return who, []string{fmt.Sprintf("attempt %d waits for circuit %s (%s)", ev.Attempt, c.Name, why),
		fmt.Sprintf("#%d waits for circuit %s", ev.Attempt, c.Name)}, s.warn
}

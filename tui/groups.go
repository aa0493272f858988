package tui

import (
	"fmt"
	"slices"
	"strings"

	"charm.land/lipgloss/v2"

	"github.com/wf-engine/wf/executor/event"
)

// The elements of an activity with for_each (activity.fetch["a"], ...) are
// grouped under a header row for the activity (activity.fetch): it shows
// how many elements are in which state, and folds them away (left, or
// enter on the header) or shows them (right, or enter again). A group
// with more than groupFold elements starts folded, so a fan-out of
// thousands does not bury the rest of the workflow.

// groupFold is the most elements a group shows unfolded at first.
const groupFold = 8

// rowGroup is what a header row holds of its elements.
type rowGroup struct {
	members   []*row
	collapsed bool
	decided   bool // the user folded or unfolded it
	counts    [stUnchanged + 1]int
}

// isElement reports whether an address is an element's, and its group's.
func isElement(activity string) (block string, ok bool) {
	b := event.Block(activity)
	return b, b != activity
}

// attach puts an element's row into its group, under the header (made
// when it does not exist yet), after the group's last member. It reports
// whether it did (r is not an element otherwise).
func (m *Model) attach(r *row) bool {
	block, ok := isElement(r.activity)
	if !ok {
		return false
	}
	h := m.groupHeader(r.instance, block, r.kind)
	r.parent = h
	at := m.index[rowKey{h.instance, h.activity}] + 1 + len(h.group.members)
	h.group.members = append(h.group.members, r)
	h.group.counts[r.st]++
	m.insertRows(at, r)
	m.regroup(h)
	return true
}

// groupHeader returns the header row of a group, made into one (or made)
// when it is not yet.
func (m *Model) groupHeader(instance, block, kind string) *row {
	k := rowKey{instance, block}
	i, ok := m.index[k]
	if !ok {
		h := &row{instance: instance, activity: block, kind: kind, group: &rowGroup{}}
		m.index[k] = len(m.rows)
		m.rows = append(m.rows, h)
		m.noteInstance(instance)
		m.noteWidth(h)
		return h
	}
	h := m.rows[i]
	if h.group == nil {
		// The activity's row from the plan (its for_each not known then)
		// becomes the header of its elements.
		h.group = &rowGroup{}
		if kind != "" {
			h.kind = kind
		}
	}
	return h
}

// insertRows puts rs at position at of the rows and reindexes what moved.
func (m *Model) insertRows(at int, rs ...*row) {
	if at >= len(m.rows) {
		for _, r := range rs {
			m.index[rowKey{r.instance, r.activity}] = len(m.rows)
			m.rows = append(m.rows, r)
		}
	} else {
		m.rows = slices.Insert(m.rows, at, rs...)
		for i := at; i < len(m.rows); i++ {
			m.index[rowKey{m.rows[i].instance, m.rows[i].activity}] = i
		}
	}
	for _, r := range rs {
		m.noteWidth(r)
	}
	m.filter.dirty = true
}

// applyExpanded adds the elements of an activity whose for_each became
// known during the run, all at once under its row.
func (m *Model) applyExpanded(ev *event.Event) {
	h := m.groupHeader(ev.Instance, ev.Activity, ev.Kind)
	var add []*row
	for _, a := range ev.Activities {
		if _, exists := m.index[rowKey{ev.Instance, a.Activity}]; exists {
			continue
		}
		r := &row{instance: ev.Instance, activity: a.Activity, kind: a.Kind, action: a.Action, maxAttempts: a.MaxAttempts, parent: h}
		r.st = stPending
		h.group.members = append(h.group.members, r)
		h.group.counts[r.st]++
		add = append(add, r)
	}
	at := m.index[rowKey{h.instance, h.activity}] + 1 + len(h.group.members) - len(add)
	m.insertRows(at, add...)
	m.regroup(h)
}

// noteStatus keeps a group's counts and state when an element's state
// changes.
func (m *Model) noteStatus(r *row, before status) {
	h := r.parent
	if h == nil || r.st == before {
		return
	}
	h.group.counts[before]--
	h.group.counts[r.st]++
	h.st = groupState(h.group)
}

// regroup recomputes a header's state and, until the user folds or
// unfolds it, folds a group with more than groupFold elements.
func (m *Model) regroup(h *row) {
	g := h.group
	h.st = groupState(g)
	if h.kind == "" && len(g.members) > 0 {
		h.kind = g.members[0].kind
	}
	if !g.decided {
		m.setCollapsed(h, len(g.members) > groupFold)
	}
}

// groupState is a group's state as one row's: live when an element is,
// else pending, failed, skipped (all) or succeeded.
func groupState(g *rowGroup) status {
	c := g.counts
	switch {
	case c[stRunning]+c[stAttemptFailed] > 0:
		return stRunning
	case c[stRetryWait]+c[stBudgetWait]+c[stSleeping] > 0:
		return stRetryWait
	case c[stPending] > 0:
		return stPending
	case c[stFailed] > 0:
		return stFailed
	case len(g.members) > 0 && c[stSkipped] == len(g.members):
		return stSkipped
	case len(g.members) > 0 && c[stUnchanged] == len(g.members):
		return stUnchanged
	}
	return stSucceeded
}

// setCollapsed folds or unfolds a group.
func (m *Model) setCollapsed(h *row, collapsed bool) {
	if h.group == nil || h.group.collapsed == collapsed {
		return
	}
	h.group.collapsed = collapsed
	if collapsed {
		m.collapsed++
	} else {
		m.collapsed--
	}
	m.filter.dirty = true
}

// toggleGroup folds (fold) or unfolds the group of the selected row; on
// an element, folding selects its header.
func (m *Model) toggleGroup(fold bool) bool {
	r := m.selectedRow()
	if r == nil {
		return false
	}
	h := r
	if r.parent != nil {
		h = r.parent
	}
	if h.group == nil {
		return false
	}
	h.group.decided = true
	m.setCollapsed(h, fold)
	m.selRow = m.index[rowKey{h.instance, h.activity}]
	if !fold {
		m.selRow = m.index[rowKey{r.instance, r.activity}]
	}
	m.refreshVisible()
	if p := m.posOf(m.selRow); p >= 0 {
		m.selectPos(p)
	}
	return true
}

// hidden reports whether a row is folded away.
func hidden(r *row) bool { return r.parent != nil && r.parent.group.collapsed }

// describeGroup is a header's symbol and detail: its elements by state.
func (m *Model) describeGroup(r *row, w int) (string, string) {
	g := r.group
	c := g.counts
	n := len(g.members)
	sym, st := m.groupSymbol(r.st)
	parts := []string{}
	add := func(k int, word string) {
		if k > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", k, word))
		}
	}
	add(c[stRunning]+c[stAttemptFailed], "running")
	add(c[stRetryWait]+c[stBudgetWait]+c[stSleeping], "waiting")
	add(c[stPending], "pending")
	add(c[stSucceeded], "succeeded")
	add(c[stFailed], "failed")
	add(c[stSkipped], "skipped")
	add(c[stUnchanged], "unchanged")
	head := fmt.Sprintf("%d %s", n, plural(n, "element", "elements"))
	forms := []string{head + ": " + strings.Join(parts, " · "), strings.Join(parts, " · "), head}
	return sym, st.Render(fit(w, forms...))
}

// foldMark is the mark before a header's name: unfolded or folded.
func foldMark(g *rowGroup) string {
	if g.collapsed {
		return "▸ "
	}
	return "▾ "
}

// skipWhy says why an activity was skipped, in words.
func skipWhy(reason string) string {
	switch reason {
	case "", event.ReasonUpstreamFailed:
		return "upstream failed"
	case event.ReasonUpstreamSkipped:
		return "upstream skipped"
	case event.ReasonNoUpstreamFailed:
		return "no upstream failed"
	case event.ReasonConditionFalse:
		return "when is false"
	}
	return strings.ReplaceAll(reason, "_", " ")
}

// outputLine is the event log line of a workflow output.
func outputLine(ev *event.Event) string {
	v := ev.Value
	switch {
	case v == nil:
		return "output"
	case ev.Error != nil:
		return "output " + v.Name + ": error: " + errMessage(ev.Error)
	case v.Sensitive:
		return "output " + v.Name + " = (sensitive)"
	}
	return "output " + v.Name + " = " + strings.Join(strings.Fields(string(v.Value)), " ")
}

// groupSymbol is a header's symbol and style for its state.
func (m *Model) groupSymbol(st status) (string, lipgloss.Style) {
	s := m.styles
	switch st {
	case stRunning:
		frame := spinnerFrames.Frames[int(m.now.UnixMilli()/spinnerFrames.FPS.Milliseconds())%len(spinnerFrames.Frames)]
		return s.run.Render(frame), s.run
	case stRetryWait:
		return s.warn.Render("◌"), s.warn
	case stFailed:
		return s.bad.Render("✗"), s.bad
	case stSucceeded:
		return s.ok.Render("✓"), s.ok
	case stSkipped:
		return s.dim.Render("⊘"), s.dim
	case stUnchanged:
		return s.dim.Render("="), s.dim
	}
	return s.dim.Render("…"), s.dim
}

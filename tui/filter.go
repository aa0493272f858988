package tui

import (
	"strings"
)

// filterState is the / filter: space-separated terms that must all match
// a row. A term matches the activity's name (a substring), its kind, a
// state word (a prefix: "fail" matches failed rows) or its error type; a
// leading "!" negates it ("!done" hides finished rows).
type filterState struct {
	text    string
	editing bool
	dirty   bool  // rows changed since visible was computed
	visible []int // rows indexes that pass; nil when there is no filter
	mask    []bool
}

// stateWords are the words a filter term can name a row's state by.
func stateWords(st status) []string {
	switch st {
	case stPending:
		return []string{"pending"}
	case stRunning, stAttemptFailed:
		return []string{"running", "live"}
	case stRetryWait:
		return []string{"waiting", "retry", "live"}
	case stBudgetWait:
		return []string{"waiting", "budget", "live"}
	case stCircuitWait:
		return []string{"waiting", "circuit", "breaker", "live"}
	case stSleeping:
		return []string{"waiting", "sleeping", "live"}
	case stSucceeded:
		return []string{"succeeded", "done"}
	case stFailed:
		return []string{"failed", "done"}
	case stSkipped:
		return []string{"skipped", "done"}
	case stUnchanged:
		return []string{"unchanged", "done"}
	}
	return nil
}

func (m *Model) matches(r *row, terms []string) bool {
	name := strings.ToLower(m.displayName(r))
	for _, t := range terms {
		neg := strings.HasPrefix(t, "!")
		if neg {
			t = t[1:]
		}
		if t == "" {
			continue
		}
		if termMatches(r, name, t) == neg {
			return false
		}
	}
	return true
}

func termMatches(r *row, name, t string) bool {
	if strings.Contains(name, t) || r.kind == t {
		return true
	}
	for _, w := range stateWords(r.st) {
		if strings.HasPrefix(w, t) {
			return true
		}
	}
	return r.err != nil && strings.Contains(strings.ToLower(r.err.Type), t)
}

// refreshVisible recomputes the filtered rows when something changed and
// keeps the selection on the same activity when it is still shown.
func (m *Model) refreshVisible() {
	if !m.filter.dirty {
		return
	}
	m.filter.dirty = false
	if m.filter.text == "" {
		m.filter.visible, m.filter.mask = nil, nil
	} else {
		terms := strings.Fields(strings.ToLower(m.filter.text))
		vis := m.filter.visible[:0]
		mask := m.filter.mask[:0]
		for i, r := range m.rows {
			ok := m.matches(r, terms)
			mask = append(mask, ok)
			if ok {
				vis = append(vis, i)
			}
		}
		m.filter.visible, m.filter.mask = vis, mask
	}
	if pos := m.posOf(m.selRow); pos >= 0 {
		m.selected = pos
	}
	m.clampScroll()
}

// nVisible is the number of rows the filter lets through.
func (m *Model) nVisible() int {
	if m.filter.text == "" {
		return len(m.rows)
	}
	return len(m.filter.visible)
}

// visRow is the i-th visible row.
func (m *Model) visRow(i int) *row {
	if i < 0 || i >= m.nVisible() {
		return nil
	}
	if m.filter.text == "" {
		return m.rows[i]
	}
	return m.rows[m.filter.visible[i]]
}

// posOf is the position of rows[idx] among the visible rows, or -1.
func (m *Model) posOf(idx int) int {
	if m.filter.text == "" {
		if idx < len(m.rows) {
			return idx
		}
		return -1
	}
	for p, i := range m.filter.visible {
		if i == idx {
			return p
		}
	}
	return -1
}

// shown says whether the event log should show events of this activity:
// with a filter, only those of the rows it lets through.
func (m *Model) shown(instance, activity string) bool {
	if m.filter.text == "" || activity == "" {
		return true
	}
	i, ok := m.index[rowKey{instance, activity}]
	return ok && i < len(m.filter.mask) && m.filter.mask[i]
}

func (m *Model) setFilter(text string) {
	m.filter.text = text
	m.filter.dirty = true
	m.logBack = 0
	m.refreshVisible()
}

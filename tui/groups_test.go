package tui

import (
	"fmt"
	"strings"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/exp/golden"

	"github.com/wf-engine/wf/executor/event"
)

func elem(block, key string) event.ActivityInfo {
	return event.ActivityInfo{Activity: fmt.Sprintf("activity.%s[%q]", block, key), Block: "activity." + block, Kind: "exec", Action: "run", MaxAttempts: 3}
}

// groupScenario: a small fan-out shown open, a large one folded, and an
// activity whose for_each became known during the run.
func groupScenario() *scenario {
	infos := []event.ActivityInfo{act("list", "exec", 1)}
	for _, k := range []string{"eu", "us", "ap"} {
		infos = append(infos, elem("ship", k))
	}
	for i := range 40 {
		infos = append(infos, elem("fetch", fmt.Sprintf("k%02d", i)))
	}
	later := act("notify", "exec", 1)
	later.KnownAfter = []string{"activity.list"}
	infos = append(infos, later, act("report", "exec", 1))
	s := plan(infos...)
	s.started(0, `ship["eu"]`, 1).started(0, `ship["us"]`, 1)
	s.succeeded(time.Second, `ship["eu"]`, 1, time.Second)
	s.failed(time.Second, `ship["us"]`, 1, "http:503", "busy").retry(time.Second, `ship["us"]`, 2, 4*time.Second)
	for i := range 40 {
		name := fmt.Sprintf("fetch[%q]", fmt.Sprintf("k%02d", i))
		s.started(0, name, 1)
		if i < 30 {
			s.succeeded(time.Second, name, 1, time.Second)
		}
	}
	s.started(0, "list", 1).succeeded(time.Second, "list", 1, time.Second)
	s.add(time.Second, event.Event{Type: event.ActivityExpanded, Activity: "activity.notify", Kind: "exec",
		Activities: []event.ActivityInfo{elem("notify", "a"), elem("notify", "b")}})
	return s
}

// TestGroupedElements: elements sit under their activity, a large group
// starts folded, enter and left/right fold and unfold, the counts count
// elements (not the headers).
func TestGroupedElements(t *testing.T) {
	m, _ := newTestModel(2*time.Second, &fakeController{})
	m.Apply(groupScenario().evs)
	m.width, m.height = 80, 24
	out := m.Render()
	for _, want := range []string{
		"◌ ▾ ship      exec                1 waiting · 1 pending · 1 succeeded",
		`    ["eu"]`,
		"▸ fetch     exec                40 elements: 10 running · 30 succeeded",
		"2 elements: 2 pending",
		"running 10  waiting 1  succeeded 32",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("frame lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, `["k00"]`) {
		t.Errorf("the folded group shows its elements:\n%s", out)
	}
	// The rows: list, ship + 3, fetch (folded), notify + 2, report.
	if n := m.nVisible(); n != 1+4+1+3+1 {
		t.Errorf("%d visible rows", n)
	}
	lines := strings.Split(out, "\n")
	order := []string{"list", "ship", `["eu"]`, `["us"]`, `["ap"]`, "fetch", "notify", `["a"]`, `["b"]`, "report"}
	pos := 0
	for _, l := range lines {
		if pos < len(order) && strings.Contains(l, " "+order[pos]+" ") {
			pos++
		}
	}
	if pos != len(order) {
		t.Errorf("rows out of order (matched %d of %v):\n%s", pos, order, out)
	}

	// Select fetch (row 6) and unfold it with enter; fold it with left.
	for range 5 {
		m.handleKey(press("down"))
	}
	if r := m.selectedRow(); r == nil || r.activity != "activity.fetch" {
		t.Fatalf("selected %+v", r)
	}
	m.handleKey(press("enter"))
	if n := m.nVisible(); n != 10+40 {
		t.Errorf("unfolded: %d visible rows", n)
	}
	m.handleKey(press("down"))
	if r := m.selectedRow(); r == nil || r.activity != `activity.fetch["k00"]` {
		t.Fatalf("selected %+v", r)
	}
	m.handleKey(tea.KeyPressMsg{Code: tea.KeyLeft})
	if r := m.selectedRow(); r == nil || r.activity != "activity.fetch" || m.nVisible() != 10 {
		t.Errorf("left on an element: selected %v, %d visible", r, m.nVisible())
	}
	m.handleKey(tea.KeyPressMsg{Code: tea.KeyRight})
	if m.nVisible() != 50 {
		t.Errorf("right: %d visible", m.nVisible())
	}
	golden.RequireEqual(t, frame(t, m, 80, 24))
}

package tui

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"

	"github.com/wf-engine/wf/executor/event"
)

// richModel is a model over richRun at the given size, the clock at t0+10s.
func richModel(t *testing.T, w, h int) (*Model, *fakeController, *fakeClock) {
	t.Helper()
	ctl := &fakeController{}
	clk := newClock(at(10 * time.Second))
	m := NewModel(Options{Title: "wf apply", Now: clk.Now, Controller: ctl})
	m.Update(tea.WindowSizeMsg{Width: w, Height: h})
	m.Update(EventsMsg{Events: richRun()})
	return m, ctl, clk
}

func send(m *Model, ks ...string) {
	for _, msg := range keys(ks...) {
		m.Update(msg)
	}
}

// rowLine is the frame line of an activity's row.
func rowLine(t *testing.T, out, name string) string {
	t.Helper()
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, " "+name+" ") && (strings.HasPrefix(l, "  ") || strings.HasPrefix(l, "> ")) {
			return l
		}
	}
	t.Fatalf("no row for %s in:\n%s", name, out)
	return ""
}

var attemptRe = regexp.MustCompile(`(\d+)/(\d+)`)

// TestAttemptNeverAboveLimit follows one activity through an interrupted
// attempt and its retries: the column counts what the rule counts, never
// shows k > N and says how many attempts were interrupted.
func TestAttemptNeverAboveLimit(t *testing.T) {
	one := func(counted int) *event.RuleRef {
		return &event.RuleRef{Index: 1, Rules: 1, Counted: counted, CountedAll: counted}
	}
	ev := func(typ event.Type, n int, rule *event.RuleRef, errType string) event.Event {
		e := event.Event{Type: typ, Activity: "activity.a", Attempt: n, MaxAttempts: 3, Rule: rule}
		if errType != "" {
			e.Error = &event.Error{Type: errType}
		}
		if typ == event.RetryScheduled {
			e.DelayMs = event.Ms(time.Second)
		}
		return e
	}
	steps := []struct {
		ev   event.Event
		want string
	}{
		{ev(event.AttemptStarted, 1, one(0), ""), "attempt 1/3"},
		{ev(event.AttemptFailed, 1, one(0), "interrupted"), "attempt 1 · 0/3 · 1 interrupted"},
		{ev(event.RetryScheduled, 2, one(0), ""), "attempt 1 · 0/3 · 1 interrupted"},
		{ev(event.AttemptStarted, 2, one(0), ""), "attempt 2 · 1/3 · 1 interrupted"},
		{ev(event.AttemptFailed, 2, one(1), "http:503"), "attempt 2 · 1/3 · 1 interrupted"},
		{ev(event.RetryScheduled, 3, one(1), ""), "attempt 2 · 1/3 · 1 interrupted"},
		{ev(event.AttemptStarted, 3, one(1), ""), "attempt 3 · 2/3 · 1 interrupted"},
		{ev(event.AttemptFailed, 3, one(2), "http:503"), "attempt 3 · 2/3 · 1 interrupted"},
		{ev(event.RetryScheduled, 4, one(2), ""), "attempt 3 · 2/3 · 1 interrupted"},
		{ev(event.AttemptStarted, 4, one(2), ""), "attempt 4 · 3/3 · 1 interrupted"},
		{ev(event.AttemptFailed, 4, one(3), "http:503"), "attempt 4 · 3/3 · 1 interrupted"},
		{event.Event{Type: event.ActivityFailed, Activity: "activity.a", Attempt: 4, MaxAttempts: 3, Rule: one(3),
			Reason: event.ReasonMaxAttempts, Error: &event.Error{Type: "http:503"}}, "attempt 4 · 3/3 · 1 interrupted"},
	}
	m, _ := newTestModel(0, nil)
	m.Update(tea.WindowSizeMsg{Width: 200, Height: 30})
	m.Update(EventsMsg{Events: plan(act("a", "http", 3)).evs})
	for i, st := range steps {
		m.Update(EventsMsg{Events: (&scenario{}).add(time.Duration(i)*time.Second, st.ev).evs})
		got := m.rows[0].attemptText()
		if got != st.want {
			t.Fatalf("after %s #%d: %q, want %q", st.ev.Type, st.ev.Attempt, got, st.want)
		}
		checkWithinLimit(t, got)
		if line := rowLine(t, m.Render(), "a"); !strings.Contains(line, st.want) {
			t.Fatalf("row shows %q, want %q", line, st.want)
		}
	}
}

func checkWithinLimit(t *testing.T, label string) {
	t.Helper()
	for _, g := range attemptRe.FindAllStringSubmatch(label, -1) {
		k, _ := strconv.Atoi(g[1])
		n, _ := strconv.Atoi(g[2])
		if k > n {
			t.Fatalf("%q shows %d of %d", label, k, n)
		}
	}
}

func TestAttemptLabels(t *testing.T) {
	two := func(index, counted, all int, on ...string) event.RuleRef {
		return event.RuleRef{Index: index, Rules: 2, On: on, Counted: counted, CountedAll: all}
	}
	tests := []struct {
		name  string
		r     row
		forms []string
	}{
		{"no rule spoken yet", row{attempt: 1, st: stRunning, maxAttempts: 5, rule: two(0, 0, 0)}, []string{"attempt 1"}},
		{"the 429 rule speaks", row{attempt: 6, st: stRunning, maxAttempts: 10, rule: two(1, 1, 5, "http:429")},
			[]string{"attempt 6 · http:429 rule 2/10", "attempt 6 · 429 rule 2/10", "attempt 6 · 429 2/10", "6 · 429 2/10"}},
		{"the catch-all speaks, waiting", row{attempt: 3, st: stRetryWait, maxAttempts: 5, rule: two(2, 2, 3)},
			[]string{"attempt 3 · catch-all rule 2/5", "attempt 3 · other rule 2/5", "attempt 3 · other 2/5", "3 · other 2/5"}},
		{"flagged non-retryable at once", row{attempt: 1, st: stFailed, maxAttempts: 3, lastUncounted: true,
			rule: event.RuleRef{Index: 1, Rules: 1}}, []string{"attempt 1/3"}},
		{"unlimited", row{attempt: 40, st: stRunning, rule: event.RuleRef{Index: 1, Rules: 1, Counted: 39, CountedAll: 39}},
			[]string{"attempt 40/∞"}},
		{"no rule facts, beyond the limit", row{attempt: 7, st: stRunning, maxAttempts: 5}, []string{"attempt 7"}},
		{"no retry block, after an interruption", row{attempt: 2, st: stRunning, maxAttempts: 1},
			[]string{"attempt 2 · 1/1 · 1 interrupted", "attempt 2 · 1/1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.r.attemptLabels()
			if fmt.Sprint(got) != fmt.Sprint(tt.forms) {
				t.Fatalf("labels %q, want %q", got, tt.forms)
			}
			for _, f := range got {
				checkWithinLimit(t, f)
			}
		})
	}
}

func TestFilter(t *testing.T) {
	tests := []struct {
		text string
		want []string
	}{
		{"fail", []string{"refund"}},
		{"charge", []string{"charge_card"}},
		{"sleep", []string{"cool_down"}},
		{"budget", []string{"capture"}},
		{"http:5", []string{"charge_card"}},
		{"live !budget", []string{"fetch_inventory", "charge_card", "cool_down", "poll_rates", "migrate_db"}},
		{"exec !done", []string{"migrate_db"}},
		{"RETRY", []string{"charge_card"}},
	}
	for _, tt := range tests {
		t.Run(tt.text, func(t *testing.T) {
			m, _, _ := richModel(t, 120, 40)
			send(m, "/", "type:"+tt.text, "enter")
			var got []string
			for i := 0; i < m.nVisible(); i++ {
				got = append(got, shortName(m.visRow(i).activity))
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Fatalf("filter %q shows %v, want %v", tt.text, got, tt.want)
			}
			if !strings.Contains(m.Render(), fmt.Sprintf("filter %q: %d of 10", tt.text, len(tt.want))) {
				t.Fatalf("frame does not say the filter:\n%s", m.Render())
			}
		})
	}

	// The selection stays on its activity through a filter and its removal,
	// and the event log shows only the filtered activities.
	m, ctl, _ := richModel(t, 120, 40)
	send(m, "down", "down", "down") // charge_card
	send(m, "/", "type:live")
	if r := m.selectedRow(); r == nil || r.activity != "activity.charge_card" {
		t.Fatalf("selection moved to %v while filtering", r)
	}
	for _, l := range strings.Split(m.Render(), "\n") {
		if strings.Contains(l, "activity.refund:") {
			t.Fatalf("event log shows a filtered-out activity: %q", l)
		}
	}
	send(m, "r") // typed into the filter, not a retry
	if m.filter.text != "liver" || len(ctl.fired) != 0 {
		t.Fatalf("filter %q, fired %v", m.filter.text, ctl.fired)
	}
	send(m, "esc")
	if m.filter.text != "" || m.filter.editing || m.nVisible() != 10 {
		t.Fatalf("esc left filter %q editing %v visible %d", m.filter.text, m.filter.editing, m.nVisible())
	}
	if r := m.selectedRow(); r == nil || r.activity != "activity.charge_card" {
		t.Fatalf("selection lost after clearing the filter: %v", r)
	}
}

func TestNoticeFades(t *testing.T) {
	m, ctl, clk := richModel(t, 100, 30)
	send(m, "down", "down", "down")
	_, cmd := m.Update(press("r"))
	if cmd == nil || len(ctl.fired) != 1 {
		t.Fatalf("r: cmd %v fired %v", cmd, ctl.fired)
	}
	if !strings.Contains(m.Render(), "fired activity.charge_card now") {
		t.Fatalf("no banner:\n%s", m.Render())
	}
	clk.Advance(noticeTTL - 100*time.Millisecond)
	m.Update(tickMsg{})
	if !strings.Contains(m.Render(), "fired activity.charge_card now") {
		t.Fatal("banner gone too early")
	}
	clk.Advance(200 * time.Millisecond)
	m.Update(tickMsg{})
	if strings.Contains(m.Render(), "fired activity.charge_card") {
		t.Fatalf("banner still there after %s:\n%s", noticeTTL, m.Render())
	}
	// The expiry message clears it even without a tick.
	m.Update(press("r"))
	m.Update(noticeExpiredMsg{seq: m.noticeSeq})
	if m.notice != "" {
		t.Fatalf("notice %q after its expiry message", m.notice)
	}
	// The stopping status is not a banner: it stays.
	send(m, "q")
	clk.Advance(time.Minute)
	m.Update(tickMsg{})
	if !strings.Contains(m.Render(), "stopping") {
		t.Fatalf("stopping status faded:\n%s", m.Render())
	}
}

func TestPagingKeys(t *testing.T) {
	m, _ := newTestModel(0, nil)
	m.Update(tea.WindowSizeMsg{Width: 80, Height: 24})
	m.Update(EventsMsg{Events: manyActivities(200)})
	page := m.layout().rows
	steps := []struct {
		key  string
		want int
	}{
		{"pgdown", page}, {"pgdown", 2 * page}, {"pgup", page}, {"G", 199}, {"up", 198},
		{"g", 0}, {"end", 199}, {"home", 0}, {"ctrl+f", page}, {"ctrl+b", 0}, {"space", page},
	}
	for _, st := range steps {
		m.Update(press(st.key))
		if m.selected != st.want {
			t.Fatalf("after %s: selected %d, want %d", st.key, m.selected, st.want)
		}
		checkFrame(t, m, 80, 24, fmt.Sprintf("> … step_%04d", st.want))
	}
}

func TestEventLogScrolls(t *testing.T) {
	m, _, _ := richModel(t, 80, 24)
	newest := "activity.migrate_db: attempt 2 started"
	if !strings.Contains(m.Render(), newest) {
		t.Fatalf("log does not follow the newest event:\n%s", m.Render())
	}
	send(m, "tab", "up", "up")
	out := m.Render()
	if strings.Contains(out, newest) || !strings.Contains(out, "2 newer below") {
		t.Fatalf("log did not scroll back:\n%s", out)
	}
	send(m, "g")
	if !strings.Contains(m.Render(), "order/order-1001: plan: 10 activities") {
		t.Fatalf("g did not reach the oldest event:\n%s", m.Render())
	}
	send(m, "G")
	if m.logBack != 0 || !strings.Contains(m.Render(), newest) {
		t.Fatalf("G did not follow again (back %d)", m.logBack)
	}
	send(m, "tab", "down")
	if m.focus != paneRows || m.selected != 1 {
		t.Fatalf("tab back: focus %v selected %d", m.focus, m.selected)
	}
}

func TestMouse(t *testing.T) {
	m, _, _ := richModel(t, 80, 24)
	m.Render()
	rows := m.regions.rowsTop
	m.Update(tea.MouseWheelMsg{Button: tea.MouseWheelDown, Y: rows + 1})
	if m.selected != 3 {
		t.Fatalf("wheel down over the rows: selected %d, want 3", m.selected)
	}
	m.Update(tea.MouseWheelMsg{Button: tea.MouseWheelUp, Y: rows + 1})
	if m.selected != 0 {
		t.Fatalf("wheel up: selected %d", m.selected)
	}
	m.Update(tea.MouseClickMsg{Button: tea.MouseLeft, Y: rows + 6})
	if r := m.selectedRow(); r == nil || r.activity != "activity.refund" {
		t.Fatalf("click selected %v, want refund", r)
	}
	m.Render()
	m.Update(tea.MouseWheelMsg{Button: tea.MouseWheelUp, Y: m.regions.logTop})
	if m.logBack != 3 || m.selected != 6 {
		t.Fatalf("wheel over the log: back %d selected %d", m.logBack, m.selected)
	}
	// In a view the wheel scrolls its text.
	send(m, "e")
	m.Update(tea.MouseWheelMsg{Button: tea.MouseWheelDown})
	if m.scroll != 3 {
		t.Fatalf("wheel in the error view: scroll %d", m.scroll)
	}
}

func TestViewsNavigate(t *testing.T) {
	m, _, _ := richModel(t, 100, 30)
	send(m, "down", "enter")
	if m.screen != screenHistory || m.attemptIdx(m.selectedRow()) != 3 {
		t.Fatalf("enter: screen %v attempt %d", m.screen, m.attempt)
	}
	send(m, "up", "l")
	if m.screen != screenLogs || !strings.Contains(m.Render(), "attempt 3 · failed (exit:1)") {
		t.Fatalf("l from history shows:\n%s", m.Render())
	}
	out := m.Render()
	if strings.Contains(out, "\x1b") || !strings.Contains(out, `error: field "amount" is missing`) {
		t.Fatalf("captured stderr not shown, or not sanitised:\n%q", out)
	}
	send(m, "right")
	if !strings.Contains(m.Render(), "attempt 4 · succeeded") {
		t.Fatalf("right did not move to attempt 4:\n%s", m.Render())
	}
	send(m, "e")
	if m.screen != screenError {
		t.Fatalf("e from logs: screen %v", m.screen)
	}
	send(m, "esc")
	if m.screen != screenLogs {
		t.Fatalf("esc from error: screen %v, want logs", m.screen)
	}
	send(m, "q", "q") // q goes back in views, like less
	if m.screen != screenMain || m.final.Stopped {
		t.Fatalf("q q from logs: screen %v stopped %v", m.screen, m.final.Stopped)
	}
	// A long output scrolls.
	m.rows[1].history[0].output = event.NewOutput(strings.Repeat("a line of output\n", 100), "", "")
	send(m, "enter", "home", "l", "pgdown")
	if !strings.Contains(m.Render(), fmt.Sprintf("lines %d-", m.pagerHeight()+1)) {
		t.Fatalf("pgdown did not scroll the output:\n%s", m.Render())
	}
}

func TestHelpListsEveryKey(t *testing.T) {
	m, _, _ := richModel(t, 200, 60)
	send(m, "?")
	out := m.Render()
	shown := map[string]string{"up": "↑", "down": "↓", "left": "←", "right": "→"}
	k := m.keys
	for _, b := range []interface{ Keys() []string }{
		k.Up, k.Down, k.PageUp, k.PageDown, k.Home, k.End, k.Tab, k.Enter, k.Logs, k.Error,
		k.Filter, k.Back, k.Prev, k.Next, k.Fire, k.Quit, k.Interrupt, k.Help,
	} {
		for _, name := range b.Keys() {
			want := name
			if s, ok := shown[name]; ok {
				want = s
			}
			if !strings.Contains(out, want) {
				t.Errorf("help overlay does not list %q", name)
			}
		}
	}
	send(m, "esc")
	if m.helpOpen {
		t.Fatal("esc did not close the help")
	}
}

func TestColorMeaning(t *testing.T) {
	const (
		red   = "\x1b[31m"
		green = "\x1b[32m"
		amber = "\x1b[38;5;214m"
	)
	m := NewModel(Options{Now: newClock(at(10 * time.Second)).Now, Color: true})
	m.Update(tea.WindowSizeMsg{Width: 120, Height: 40})
	m.Update(EventsMsg{Events: allStates()})
	out := m.Render()
	for _, c := range []struct{ text, color string }{
		{"refund", red}, {"charge_card", amber}, {"capture", amber}, {"validate_order_payload", green},
		{"activity.refund: failed:", red}, {"activity.charge_card: attempt 1 failed", amber},
		{"activity.validate_order_payload: succeeded", green},
	} {
		line := ""
		for _, l := range strings.Split(out, "\n") {
			if strings.Contains(stripANSI(l), c.text) {
				line = l
				break
			}
		}
		if !strings.Contains(line, c.color) {
			t.Errorf("%s: line %q lacks %q", c.text, line, c.color)
		}
	}
	for _, b := range []struct {
		used  int
		color string
	}{{5, green}, {8, amber}, {10, red}} {
		line := m.renderBudget(event.BudgetUsage{Name: "api", Used: b.used, MaxRetries: 10, WindowMs: 60000}, 80)
		if !strings.Contains(line, b.color) {
			t.Errorf("budget at %d/10: %q lacks %q", b.used, line, b.color)
		}
	}
}

func stripANSI(s string) string { return regexp.MustCompile("\x1b\\[[0-9;]*m").ReplaceAllString(s, "") }

// TestTruncationKeepsKeyParts: narrow windows drop decoration, not the
// point of a message.
func TestTruncationKeepsKeyParts(t *testing.T) {
	free := at(6 * time.Second)
	budget := &event.BudgetUsage{Name: "payment_api_with_a_long_name", Used: 10, MaxRetries: 10, WindowMs: 60000}
	evs := plan(act("charge_card_for_the_order", "http", 5), act("capture", "http", 0)).
		started(0, "charge_card_for_the_order", 1).
		failed(time.Second, "charge_card_for_the_order", 1, "http:429", "").
		add(time.Second, event.Event{Type: event.RetryScheduled, Activity: "activity.charge_card_for_the_order", Attempt: 2,
			DelayMs: event.Ms(3 * time.Second), DelaySource: "server"}).
		started(0, "capture", 1).failed(time.Second, "capture", 1, "http:429", "").
		add(time.Second, event.Event{Type: event.BudgetWait, Activity: "activity.capture", Attempt: 2, FireAt: &free, Budget: budget}).evs
	for _, w := range []int{80, 70, 60} {
		m, _ := newTestModel(2*time.Second, nil)
		m.Update(tea.WindowSizeMsg{Width: w, Height: 24})
		m.Update(EventsMsg{Events: evs})
		out := m.Render()
		for _, want := range []string{"frees in 4.0s", "retry 2 in 2.0s", "(server asked)"} {
			if !strings.Contains(out, want) {
				t.Errorf("%d columns: frame lacks %q:\n%s", w, want, out)
			}
		}
	}
}

// TestRunRequestsOnlyNeededModes: the dashboard never pushes keyboard
// enhancements or bracketed paste, which a killed dashboard would leave
// on in the terminal.
func TestRunRequestsOnlyNeededModes(t *testing.T) {
	bus := event.NewBus()
	sub := bus.Subscribe()
	pr, pw := io.Pipe()
	defer pw.Close()
	var out bytes.Buffer
	done := make(chan error, 1)
	go func() {
		_, err := Run(context.Background(), sub, Options{Controller: &fakeController{}}, pr, &out)
		done <- err
	}()
	bus.Publish(plan(act("a", "http", 3)).started(0, "a", 1).evs...)
	if _, err := pw.Write([]byte("?")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	bus.Publish((&scenario{}).add(time.Second, event.Event{Type: event.RunCompleted, Status: event.StatusSucceeded,
		Summary: &event.Summary{Activities: 1}}).evs...)
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return")
	}
	if on, off := strings.LastIndex(out.String(), "\x1b[?2004h"), strings.LastIndex(out.String(), "\x1b[?2004l"); on > off {
		t.Errorf("bracketed paste left on")
	}
	for name, seq := range map[string]string{
		"kitty keyboard push": "\x1b[>1u", "kitty keyboard query": "\x1b[?u", "modifyOtherKeys": "\x1b[>4;",
	} {
		if strings.Contains(out.String(), seq) {
			t.Errorf("the dashboard asked for %s (%q)", name, seq)
		}
	}
	v := NewModel(Options{}).View()
	if v.MouseMode != tea.MouseModeNone || !v.DisableBracketedPasteMode || v.KeyboardEnhancements != (tea.KeyboardEnhancements{}) {
		t.Fatalf("view asks for %+v", v)
	}
}

// TestFramesFitEverySize renders every screen at sizes from tiny to huge.
func TestFramesFitEverySize(t *testing.T) {
	screens := [][]string{nil, {"?"}, {"/", "type:a"}, {"down", "enter"}, {"down", "l", "left"}, {"6", "e"}, {"tab", "up"}, {"q"}}
	for _, size := range [][2]int{{80, 24}, {200, 60}, {60, 12}, {120, 40}, {40, 10}, {250, 70}} {
		for _, ks := range screens {
			m, _, _ := richModel(t, size[0], size[1])
			send(m, ks...)
			checkFrame(t, m, size[0], size[1], "")
		}
	}
}

// TestLogsFollowNewAttempts: logs opened on a retrying activity show each
// new attempt as it ends, until the user picks an older one.
func TestLogsFollowNewAttempts(t *testing.T) {
	m, _ := newTestModel(time.Minute, nil)
	m.Update(tea.WindowSizeMsg{Width: 100, Height: 30})
	s := plan(act("a", "exec", 5)).started(0, "a", 1)
	s.add(time.Second, event.Event{Type: event.AttemptFailed, Activity: "activity.a", Attempt: 1,
		Error: &event.Error{Type: "exit:1"}, Output: event.NewOutput("first\n", "", "")})
	m.Update(EventsMsg{Events: s.evs})
	send(m, "l")
	next := (&scenario{}).started(2*time.Second, "a", 2)
	next.add(3*time.Second, event.Event{Type: event.AttemptFailed, Activity: "activity.a", Attempt: 2,
		Error: &event.Error{Type: "exit:1"}, Output: event.NewOutput("second\n", "", "")})
	m.Update(EventsMsg{Events: next.evs})
	if out := m.Render(); !strings.Contains(out, "second") {
		t.Fatalf("logs did not follow attempt 2:\n%s", out)
	}
	send(m, "left")
	third := (&scenario{}).started(4*time.Second, "a", 3)
	m.Update(EventsMsg{Events: third.evs})
	if out := m.Render(); !strings.Contains(out, "first") {
		t.Fatalf("a picked attempt did not stay:\n%s", out)
	}
}

// TestOutputKeptForLatestAttempts: a long retry storm keeps the output of
// the latest attempts only, and the logs view says so for older ones.
func TestOutputKeptForLatestAttempts(t *testing.T) {
	s := plan(act("a", "exec", 0))
	for i := 1; i <= outputKeep+5; i++ {
		s.started(time.Duration(i)*time.Second, "a", i)
		s.add(time.Duration(i)*time.Second, event.Event{Type: event.AttemptFailed, Activity: "activity.a", Attempt: i,
			Error: &event.Error{Type: "exit:1"}, Output: event.NewOutput(fmt.Sprintf("out %d\n", i), "", "")})
	}
	m, _ := newTestModel(time.Minute, nil)
	m.Update(tea.WindowSizeMsg{Width: 100, Height: 30})
	m.Update(EventsMsg{Events: s.evs})
	kept := 0
	for _, a := range m.rows[0].history {
		if a.output != nil {
			kept++
		}
	}
	if kept != outputKeep {
		t.Fatalf("%d attempts keep output, want %d", kept, outputKeep)
	}
	send(m, "l")
	if !strings.Contains(m.Render(), fmt.Sprintf("out %d", outputKeep+5)) {
		t.Fatalf("latest output missing:\n%s", m.Render())
	}
	send(m, "home")
	for range outputKeep + 5 {
		send(m, "left")
	}
	if out := m.Render(); !strings.Contains(out, "keeps the output of the last") {
		t.Fatalf("oldest attempt's view does not say its output is gone:\n%s", out)
	}
}

// TestFinalFrameIsTheDashboard: whatever view is open when the run ends,
// the frame left in the terminal is the dashboard, saying the run stopped.
func TestFinalFrameIsTheDashboard(t *testing.T) {
	m, _, _ := richModel(t, 80, 24)
	send(m, "q", "down", "l", "?")
	m.Update(EventsMsg{Events: (&scenario{}).add(11*time.Second, event.Event{Type: event.RunCompleted, Status: event.StatusInterrupted,
		Summary: &event.Summary{Activities: 10}}).evs})
	out := m.Render()
	for _, want := range []string{"── activities", "stopped: state saved; run wf apply again to resume", "interrupted · elapsed"} {
		if !strings.Contains(out, want) {
			t.Fatalf("final frame lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "╭─ keys") {
		t.Fatalf("final frame shows the help:\n%s", out)
	}
}

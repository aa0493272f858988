package tui

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/exp/golden"
	"github.com/charmbracelet/x/exp/teatest/v2"

	"github.com/wf-engine/wf/executor/event"
)

func press(s string) tea.KeyPressMsg {
	switch s {
	case "up":
		return tea.KeyPressMsg{Code: tea.KeyUp}
	case "down":
		return tea.KeyPressMsg{Code: tea.KeyDown}
	case "enter":
		return tea.KeyPressMsg{Code: tea.KeyEnter}
	case "esc":
		return tea.KeyPressMsg{Code: tea.KeyEscape}
	case "ctrl+c":
		return tea.KeyPressMsg{Code: 'c', Mod: tea.ModCtrl}
	}
	r := []rune(s)[0]
	return tea.KeyPressMsg{Code: r, Text: s}
}

// newTestModel builds a model with a fake clock at t0+now.
func newTestModel(now time.Duration, ctl Controller) (*Model, *fakeClock) {
	clk := newClock(at(now))
	opts := Options{Title: "wf apply", Now: clk.Now}
	if ctl != nil {
		opts.Controller = ctl
	}
	return NewModel(opts), clk
}

// frame drives a model through a real bubbletea program (teatest) at the
// given size and returns the final frame.
func frame(t *testing.T, m *Model, w, h int, msgs ...tea.Msg) string {
	t.Helper()
	tm := teatest.NewTestModel(t, m, teatest.WithInitialTermSize(w, h))
	for _, msg := range msgs {
		tm.Send(msg)
	}
	if err := tm.Quit(); err != nil {
		t.Fatal(err)
	}
	fm, ok := tm.FinalModel(t, teatest.WithFinalTimeout(5*time.Second)).(*Model)
	if !ok {
		t.Fatalf("final model is %T", fm)
	}
	return fm.Render() + "\n"
}

// rowScenario is a one-activity run that ends in a given row state.
func rowScenarios() map[string]struct {
	evs []event.Event
	now time.Duration
} {
	budget := &event.BudgetUsage{Name: "payment_api", Used: 10, MaxRetries: 10, WindowMs: 60000}
	free := at(6 * time.Second)
	wake := at(4*time.Minute + 2*time.Second)
	type sc = struct {
		evs []event.Event
		now time.Duration
	}
	return map[string]sc{
		"pending": {plan(act("charge_card", "http", 5)).evs, 0},
		"running": {plan(act("charge_card", "http", 5)).started(time.Second, "charge_card", 1).evs, 2200 * time.Millisecond},
		"retry_countdown": {plan(act("charge_card", "http", 5)).flaky("charge_card", 2).evs,
			2400 * time.Millisecond},
		"budget_wait": {plan(act("capture", "http", 0)).started(0, "capture", 1).
			failed(time.Second, "capture", 1, "http:429", "").
			add(time.Second, event.Event{Type: event.BudgetWait, Activity: "activity.capture", Attempt: 2, FireAt: &free, Budget: budget}).evs,
			2 * time.Second},
		"sleeping": {plan(act("cool_down", "sleep", 1)).
			add(2*time.Second, event.Event{Type: event.AttemptStarted, Activity: "activity.cool_down", Attempt: 1, FireAt: &wake}).evs,
			2 * time.Second},
		"succeeded": {plan(act("charge_card", "http", 5)).flaky("charge_card", 3).
			started(7*time.Second, "charge_card", 4).succeeded(7300*time.Millisecond, "charge_card", 4, 7300*time.Millisecond).evs,
			8 * time.Second},
		"failed": {plan(act("charge_card", "http", 5)).started(0, "charge_card", 1).
			add(time.Second, event.Event{Type: event.AttemptFailed, Activity: "activity.charge_card", Attempt: 1,
				Error: &event.Error{Type: "CardDeclined", NonRetryable: true}}).
			add(time.Second, event.Event{Type: event.ActivityFailed, Activity: "activity.charge_card", Attempt: 1,
				Reason: event.ReasonNonRetryable, Error: &event.Error{Type: "CardDeclined", NonRetryable: true}}).evs,
			2 * time.Second},
		"skipped": {plan(act("ship", "http", 3)).
			add(time.Second, event.Event{Type: event.ActivitySkipped, Activity: "activity.ship", Reason: event.ReasonUpstreamFailed}).evs,
			time.Second},
		"unchanged": {func() []event.Event {
			s := plan(act("setup", "exec", 1))
			s.evs[0].Activities[0].Action = "unchanged"
			return s.evs
		}(), 0},
	}
}

func TestGoldenRowStates(t *testing.T) {
	for name, sc := range rowScenarios() {
		t.Run(name, func(t *testing.T) {
			m, _ := newTestModel(sc.now, &fakeController{})
			golden.RequireEqual(t, frame(t, m, 80, 24, EventsMsg{Events: sc.evs}))
		})
	}
}

func TestGoldenLayouts(t *testing.T) {
	tests := []struct {
		name string
		w, h int
		keys []string
	}{
		{name: "narrow_80x24", w: 80, h: 24},
		{name: "wide_200x60", w: 200, h: 60},
		{name: "history", w: 100, h: 30, keys: []string{"down", "enter"}},
		{name: "history_closed", w: 80, h: 24, keys: []string{"down", "enter", "esc"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, _ := newTestModel(10*time.Second, &fakeController{})
			msgs := []tea.Msg{EventsMsg{Events: allStates()}}
			for _, k := range tt.keys {
				msgs = append(msgs, press(k))
			}
			golden.RequireEqual(t, frame(t, m, tt.w, tt.h, msgs...))
		})
	}
}

func TestGoldenScrolledManyActivities(t *testing.T) {
	m, _ := newTestModel(0, nil)
	msgs := []tea.Msg{EventsMsg{Events: manyActivities(1000)}}
	for range 30 {
		msgs = append(msgs, press("j"))
	}
	golden.RequireEqual(t, frame(t, m, 80, 24, msgs...))
}

func TestCountdownFollowsClock(t *testing.T) {
	m, clk := newTestModel(10*time.Second, nil)
	m.Update(tea.WindowSizeMsg{Width: 120, Height: 40})
	m.Update(EventsMsg{Events: allStates()})
	steps := []struct {
		advance time.Duration
		want    []string
	}{
		{0, []string{"retry 3 in 2.4s", "running 1.2s", "sleeping 4m left", "frees in 3.0s", "elapsed 10.0s · attempts 10 · retries 4"}},
		{time.Second, []string{"retry 3 in 1.4s", "running 2.2s", "sleeping 3m59s left", "frees in 2.0s", "elapsed 11.0s"}},
		{1400 * time.Millisecond, []string{"retry 3 now"}},
	}
	for _, st := range steps {
		clk.Advance(st.advance)
		m.Update(tickMsg{})
		out := m.Render()
		for _, w := range st.want {
			if !strings.Contains(out, w) {
				t.Fatalf("after +%s the frame lacks %q:\n%s", st.advance, w, out)
			}
		}
	}
}

func TestCountdownBarDrains(t *testing.T) {
	m, clk := newTestModel(0, nil)
	m.Update(tea.WindowSizeMsg{Width: 120, Height: 30})
	m.Update(EventsMsg{Events: plan(act("a", "http", 0)).started(0, "a", 1).
		failed(0, "a", 1, "http:503", "").retry(0, "a", 2, 4*time.Second).evs})
	prev := -1
	for i := 0; i <= 40; i++ {
		filled := strings.Count(m.Render(), "█")*8 + countPartial(m.Render())
		if prev >= 0 && filled > prev {
			t.Fatalf("bar grew from %d to %d eighths at step %d", prev, filled, i)
		}
		prev = filled
		clk.Advance(100 * time.Millisecond)
		m.Update(tickMsg{})
	}
	if prev != 0 {
		t.Fatalf("bar not empty when the timer is due: %d eighths left", prev)
	}
}

func countPartial(s string) int {
	n := 0
	for i, e := range eighths {
		if e != "" {
			n += i * strings.Count(s, e)
		}
	}
	return n
}

func TestTickOnlyWhileLive(t *testing.T) {
	tests := []struct {
		name string
		evs  []event.Event
		want bool
	}{
		{"nothing yet", plan(act("a", "http", 3)).evs, false},
		{"running", plan(act("a", "http", 3)).started(0, "a", 1).evs, true},
		{"retry pending", plan(act("a", "http", 3)).flaky("a", 1).evs, true},
		{"all done", plan(act("a", "http", 3)).started(0, "a", 1).succeeded(time.Second, "a", 1, time.Second).evs, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, _ := newTestModel(0, nil)
			_, cmd := m.Update(EventsMsg{Events: tt.evs})
			if (cmd != nil) != tt.want || m.Ticking() != tt.want {
				t.Fatalf("tick armed %v (cmd %v), want %v", m.Ticking(), cmd != nil, tt.want)
			}
			// A tick re-arms only while something is still live, and a
			// second batch does not arm a second ticker.
			if tt.want {
				if _, cmd := m.Update(EventsMsg{Events: nil}); cmd != nil {
					t.Fatal("a second tick was armed while one is pending")
				}
				if _, cmd := m.Update(tickMsg{}); cmd == nil {
					t.Fatal("tick not re-armed while live")
				}
			}
		})
	}
	// Once the live row finishes, the next tick does not re-arm.
	m, _ := newTestModel(0, nil)
	m.Update(EventsMsg{Events: plan(act("a", "http", 3)).started(0, "a", 1).evs})
	m.Update(EventsMsg{Events: (&scenario{}).succeeded(time.Second, "a", 1, time.Second).evs})
	if _, cmd := m.Update(tickMsg{}); cmd != nil || m.Ticking() {
		t.Fatal("tick re-armed with nothing live")
	}
}

func TestKeys(t *testing.T) {
	// allStates rows: 0 setup, 1 validate, 2 fetch, 3 charge_card (retry
	// pending), 4 capture (budget wait), 5 cool_down, 6 refund, 7 notify.
	tests := []struct {
		name       string
		keys       []string
		readOnly   bool
		fired      []string
		detached   int
		interrupts int
		quit       bool
		detail     bool
	}{
		{name: "r fires the selected retry", keys: []string{"down", "down", "down", "r"},
			fired: []string{inst + " activity.charge_card"}},
		{name: "r on a budget wait", keys: []string{"j", "j", "j", "j", "r"},
			fired: []string{inst + " activity.capture"}},
		{name: "r without a pending retry does nothing", keys: []string{"down", "r"}},
		{name: "up stops at the top", keys: []string{"up", "k", "down", "down", "down", "up", "down", "r"},
			fired: []string{inst + " activity.charge_card"}},
		{name: "q stops the run and keeps the view until it ends", keys: []string{"q"}, detached: 1},
		{name: "q then ctrl+c cancels", keys: []string{"q", "ctrl+c"}, detached: 1, interrupts: 1},
		{name: "ctrl+c interrupts, twice", keys: []string{"ctrl+c", "ctrl+c"}, interrupts: 2},
		{name: "enter opens history, esc closes", keys: []string{"enter", "esc", "enter"}, detail: true},
		{name: "watch: q just quits", keys: []string{"q"}, readOnly: true, quit: true},
		{name: "watch: ctrl+c just quits", keys: []string{"ctrl+c"}, readOnly: true, quit: true},
		{name: "watch: r still fires", keys: []string{"down", "down", "down", "r"}, readOnly: true,
			fired: []string{inst + " activity.charge_card"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctl := &fakeController{}
			clk := newClock(at(10 * time.Second))
			m := NewModel(Options{Now: clk.Now, Controller: ctl, ReadOnly: tt.readOnly})
			m.Update(EventsMsg{Events: allStates()})
			for _, k := range tt.keys {
				m.Update(press(k))
			}
			// Running the returned commands would sleep through banner
			// timers; quitting is what tea.Quit follows.
			quit := m.quitting
			if fmt.Sprint(ctl.fired) != fmt.Sprint(tt.fired) {
				t.Errorf("FireNow calls %v, want %v", ctl.fired, tt.fired)
			}
			if ctl.detached != tt.detached || ctl.interrupts != tt.interrupts {
				t.Errorf("detach %d interrupt %d, want %d %d", ctl.detached, ctl.interrupts, tt.detached, tt.interrupts)
			}
			if quit != tt.quit {
				t.Errorf("quit %v, want %v", quit, tt.quit)
			}
			if (m.screen == screenHistory) != tt.detail {
				t.Errorf("history view open %v, want %v", m.screen == screenHistory, tt.detail)
			}
			if m.Final().Stopped != (tt.detached > 0) {
				t.Errorf("Final().Stopped %v", m.Final().Stopped)
			}
		})
	}
}

func TestSelectedRowStaysVisible(t *testing.T) {
	for _, size := range [][2]int{{80, 24}, {250, 70}, {80, 10}} {
		t.Run(fmt.Sprintf("%dx%d", size[0], size[1]), func(t *testing.T) {
			m, _ := newTestModel(0, nil)
			m.Update(tea.WindowSizeMsg{Width: size[0], Height: size[1]})
			m.Update(EventsMsg{Events: manyActivities(200)})
			for i := 0; i < 150; i++ {
				m.Update(press("down"))
				checkFrame(t, m, size[0], size[1], fmt.Sprintf("> … step_%04d", i+1))
			}
			for i := 150; i > 100; i-- {
				m.Update(press("up"))
				checkFrame(t, m, size[0], size[1], fmt.Sprintf("> … step_%04d", i-1))
			}
			// Shrinking the window keeps the selection on screen.
			m.Update(tea.WindowSizeMsg{Width: 80, Height: 12})
			checkFrame(t, m, 80, 12, "> … step_0100")
		})
	}
}

func checkFrame(t *testing.T, m *Model, w, h int, want string) {
	t.Helper()
	out := m.Render()
	lines := strings.Split(out, "\n")
	if len(lines) > h {
		t.Fatalf("frame has %d lines for a %d-line window", len(lines), h)
	}
	for _, l := range lines {
		if n := len([]rune(l)); n > w {
			t.Fatalf("line wider than %d: %q", w, l)
		}
	}
	if !strings.Contains(out, want) {
		t.Fatalf("frame lacks %q:\n%s", want, out)
	}
}

func TestColorOffHasNoEscapes(t *testing.T) {
	for _, color := range []bool{false, true} {
		m := NewModel(Options{Now: newClock(at(10 * time.Second)).Now, Color: color})
		m.Update(EventsMsg{Events: allStates()})
		has := strings.Contains(m.Render(), "\x1b[")
		if has != color {
			t.Errorf("Color=%v: escape sequences present = %v", color, has)
		}
	}
}

func TestHistoryFromEvents(t *testing.T) {
	m, _ := newTestModel(10*time.Second, nil)
	m.Update(tea.WindowSizeMsg{Width: 120, Height: 30})
	m.Update(EventsMsg{Events: allStates()})
	for range 3 {
		m.Update(press("down"))
	}
	m.Update(press("enter"))
	out := m.Render()
	for _, want := range []string{
		"activity.charge_card",
		"  1   10:00:01.000 1.0s     failed      http:503",
		"> 2   10:00:03.000 1.0s     failed      http:503",
		"4.8s (policy)",
	} {
		if !strings.Contains(out, want) {
			t.Fatalf("history lacks %q:\n%s", want, out)
		}
	}
}

func TestLogMergesFailureAndRetry(t *testing.T) {
	m, _ := newTestModel(0, nil)
	m.Update(EventsMsg{Events: plan(act("charge_card", "http", 5)).flaky("charge_card", 1).evs})
	want := "activity.charge_card: attempt 1 failed (http:503); retry 2 in 1.0s"
	if !strings.Contains(m.Render(), want) {
		t.Fatalf("log lacks %q:\n%s", want, m.Render())
	}
}

func TestRunEndsOnRunCompleted(t *testing.T) {
	bus := event.NewBus()
	sub := bus.Subscribe()
	var out bytes.Buffer
	done := make(chan struct{})
	var final Final
	var err error
	go func() {
		defer close(done)
		final, err = Run(context.Background(), sub, Options{Title: "wf apply", Now: newClock(at(9 * time.Second)).Now}, nil, &out)
	}()
	bus.Publish(plan(act("charge_card", "http", 5)).flaky("charge_card", 2).evs...)
	bus.Publish((&scenario{}).started(4*time.Second, "charge_card", 3).
		succeeded(5*time.Second, "charge_card", 3, 5*time.Second).
		add(5*time.Second, event.Event{Type: event.RunCompleted, Status: event.StatusSucceeded,
			Summary: &event.Summary{Activities: 1, Succeeded: 1, Attempts: 3, Retries: 2}}).evs...)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after run_completed")
	}
	if err != nil {
		t.Fatal(err)
	}
	if !final.Completed || final.Status != event.StatusSucceeded || final.Summary.Retries != 2 {
		t.Fatalf("final %+v", final)
	}
	if !strings.Contains(out.String(), "succeeded after 3 attempts in 5.0s") {
		t.Fatalf("final frame not in the output:\n%q", out.String())
	}
}

func TestRunStopOnQ(t *testing.T) {
	bus := event.NewBus()
	sub := bus.Subscribe()
	pr, pw := io.Pipe()
	defer pw.Close()
	ctl := &fakeController{}
	done := make(chan Final, 1)
	go func() {
		f, err := Run(context.Background(), sub, Options{Controller: ctl}, pr, io.Discard)
		if err != nil {
			t.Error(err)
		}
		done <- f
	}()
	bus.Publish(plan(act("a", "http", 3)).started(0, "a", 1).evs...)
	if _, err := pw.Write([]byte("q")); err != nil {
		t.Fatal(err)
	}
	// q stops the run; the dashboard stays until the run says it ended.
	deadline := time.Now().Add(10 * time.Second)
	for ctl.detachCalls() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("q did not reach the controller")
		}
		time.Sleep(10 * time.Millisecond)
	}
	select {
	case f := <-done:
		t.Fatalf("the dashboard quit on q before the run ended: %+v", f)
	case <-time.After(200 * time.Millisecond):
	}
	bus.Publish((&scenario{}).add(time.Second, event.Event{Type: event.RunCompleted, Status: event.StatusInterrupted,
		Summary: &event.Summary{Activities: 1, Pending: 1, Attempts: 1}}).evs...)
	select {
	case f := <-done:
		if !f.Stopped || !f.Completed || f.Status != event.StatusInterrupted || ctl.detachCalls() != 1 {
			t.Fatalf("final %+v, detach calls %d", f, ctl.detachCalls())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after run_completed")
	}
}

func TestRunStopsOnContextAndStreamEnd(t *testing.T) {
	t.Run("context", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		bus := event.NewBus()
		done := make(chan error, 1)
		go func() {
			_, err := Run(ctx, bus.Subscribe(), Options{}, nil, io.Discard)
			done <- err
		}()
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("Run ignored ctx")
		}
	})
	t.Run("stream end", func(t *testing.T) {
		bus := event.NewBus()
		sub := bus.Subscribe()
		bus.Publish(plan(act("a", "http", 3)).evs...)
		bus.Close()
		f, err := Run(context.Background(), sub, Options{ReadOnly: true}, nil, io.Discard)
		if err != nil || !f.StreamClosed || f.Completed {
			t.Fatalf("final %+v err %v", f, err)
		}
	})
}

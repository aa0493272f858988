package tui

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/x/exp/golden"

	"github.com/wf-engine/wf/executor/event"
)

// breakerRun: charge and refund are behind breaker payment_api, which
// opened at +3s for 30s; charge waits for it, refund failed before it
// opened and waits for its retry; ship heartbeats; the nested budget
// team -> org shows both levels. The clock is at +10s.
func breakerRun() []event.Event {
	openUntil := at(33 * time.Second)
	info := event.CircuitInfo{Name: "payment_api", State: event.CircuitStateOpen, HalfOpenAt: &openUntil,
		Calls: 10, Failures: 6, FailureRatio: 0.5, MinimumCalls: 10, WindowMs: 30000, BreakMs: 30000, HalfOpenCalls: 1}
	budget := &event.BudgetUsage{Name: "team", Used: 3, MaxRetries: 10, WindowMs: 60000,
		Parent: &event.BudgetUsage{Name: "org", Used: 9, MaxRetries: 10, WindowMs: 60000}}
	s := plan(act("charge", "http", 5), act("refund", "http", 5), act("ship", "exec", 3))
	s.evs[0].Circuits = []event.CircuitInfo{{Name: "payment_api", State: event.CircuitStateClosed, FailureRatio: 0.5, MinimumCalls: 10, HalfOpenCalls: 1}}
	s.started(0, "charge", 1)
	s.started(0, "refund", 1)
	s.started(0, "ship", 1)
	s.failed(3*time.Second, "charge", 1, "http:503", "service unavailable")
	s.retry(3*time.Second, "charge", 2, time.Second)
	s.evs[len(s.evs)-1].Budget = budget
	s.add(3*time.Second, event.Event{Type: event.CircuitOpened, Breaker: "payment_api", Circuit: &info})
	s.failed(3*time.Second, "refund", 1, "http:503", "service unavailable")
	s.retry(3*time.Second, "refund", 2, 20*time.Second)
	wait := info
	s.add(4*time.Second, event.Event{Type: event.CircuitWait, Activity: "activity.charge", Attempt: 2, Breaker: "payment_api",
		Circuit: &wait, FireAt: &openUntil, DelaySource: event.SourceCircuit})
	for _, off := range []time.Duration{2 * time.Second, 7 * time.Second} {
		s.add(off, event.Event{Type: event.Heartbeat, Activity: "activity.ship", Attempt: 1, HeartbeatDetails: "row 4200 of 10000"})
	}
	return s.evs
}

// TestGoldenBreaker: the breaker badge counts down to half-open, the
// waiting row says so in SPEC §11's words, the running row says when it
// last heartbeat, and both budget levels have a gauge.
func TestGoldenBreaker(t *testing.T) {
	for _, size := range [][2]int{{80, 24}, {200, 60}} {
		t.Run(fmt.Sprintf("%dx%d", size[0], size[1]), func(t *testing.T) {
			m, _ := newTestModel(10*time.Second, nil)
			out := frame(t, m, size[0], size[1], EventsMsg{Events: breakerRun()})
			want := "waiting for circuit payment_api (open, half-open in 23.0s)"
			if size[0] < 100 {
				want = "circuit payment_api (open, half-open in 23.0s)"
			}
			checkFrame(t, m, size[0], size[1], want)
			for _, want := range []string{"breaker payment_api ● open · half-open in 23.0s", "last beat 3.0s ago", "budget team", "budget org"} {
				if !strings.Contains(out, want) {
					t.Errorf("frame lacks %q:\n%s", want, out)
				}
			}
			golden.RequireEqual(t, out)
		})
	}
}

// TestCircuitBadgeStates: the badge follows the transitions, and the
// waiting row reads the breaker's current state.
func TestCircuitBadgeStates(t *testing.T) {
	m, clk := newTestModel(10*time.Second, nil)
	m.Update(EventsMsg{Events: breakerRun()})
	clk.Advance(23 * time.Second)
	m.Update(EventsMsg{Events: []event.Event{{Time: at(33 * time.Second), Type: event.CircuitHalfOpen, Breaker: "payment_api",
		Circuit: &event.CircuitInfo{Name: "payment_api", State: event.CircuitStateHalfOpen, HalfOpenCalls: 1}}}})
	out := m.Render()
	for _, want := range []string{"breaker payment_api ● half-open · 1 trial call", "circuit payment_api (half-open, trial running)"} {
		if !strings.Contains(out, want) {
			t.Errorf("half-open frame lacks %q:\n%s", want, out)
		}
	}
	m.Update(EventsMsg{Events: []event.Event{{Time: at(34 * time.Second), Type: event.CircuitClosed, Breaker: "payment_api",
		Circuit: &event.CircuitInfo{Name: "payment_api", State: event.CircuitStateClosed}}}})
	if out := m.Render(); !strings.Contains(out, "breaker payment_api ● closed") {
		t.Errorf("closed frame:\n%s", out)
	}
}

// TestCircuitWaitRow: r on a row waiting for its breaker says why it
// cannot be fired; the filter knows the state as "circuit".
func TestCircuitWaitRow(t *testing.T) {
	ctl := &fakeController{}
	m, _ := newTestModel(10*time.Second, ctl)
	m.Update(EventsMsg{Events: breakerRun()})
	m.Update(press("r")) // charge, the first row, waits for the breaker
	if len(ctl.fired) != 0 || !strings.Contains(m.Render(), "waits for circuit payment_api: it cannot be fired by hand") {
		t.Fatalf("fired %v; frame:\n%s", ctl.fired, m.Render())
	}
	m.Update(press("/"))
	for _, k := range keys("type:circuit", "enter") {
		m.Update(k)
	}
	if out := m.Render(); !strings.Contains(out, "filter \"circuit\": 1 of 3") {
		t.Fatalf("filter frame:\n%s", out)
	}
}

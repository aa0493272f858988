package core

import (
	"testing"
	"time"

	"github.com/wf-engine/wf/config"
	"github.com/wf-engine/wf/executor/event"
	"github.com/wf-engine/wf/retry"
)

// TestBudgetHighOncePerCrossing: budget_high is emitted when a grant takes
// usage to 80 % or more, not again while it stays there, and again after
// usage fell below 80 % (grants left the window) and rose back.
func TestBudgetHighOncePerCrossing(t *testing.T) {
	names := []string{"a1", "a2", "a3", "a4", "a5"}
	var acts []*config.Activity
	for _, n := range names {
		acts = append(acts, execAct(n, budgetRule("api")))
	}
	w := &world{
		wf:      workflow(acts...),
		budgets: map[string]retry.Budget{"api": {Name: "api", MaxRetries: 5, Window: 10 * time.Second, OnExhausted: "wait"}},
	}
	h := newHarness(t, w, nil, t0)
	h.start()
	// failEach fails the running attempts of names in one step each and
	// returns the used count of every budget_high event, per step.
	failEach := func(names ...string) [][]int {
		var out [][]int
		for _, n := range names {
			var used []int
			for _, e := range eventsOf(h.finish(n, fail("http:503")), event.BudgetHigh) {
				if e.Budget == nil || e.Budget.Name != "api" || e.Activity != "activity."+n || e.Instance != addr {
					t.Fatalf("budget_high %+v", e)
				}
				used = append(used, e.Budget.Used)
			}
			out = append(out, used)
		}
		return out
	}
	check := func(what string, got [][]int, want ...[]int) {
		t.Helper()
		if len(got) != len(want) {
			t.Fatalf("%s: %v, want %v", what, got, want)
		}
		for i := range got {
			if len(got[i]) != len(want[i]) || (len(got[i]) == 1 && got[i][0] != want[i][0]) {
				t.Fatalf("%s: budget_high per failure %v, want %v", what, got, want)
			}
		}
	}
	h.at(time.Second)
	// 1/5 2/5 3/5 4/5 (80 %: warn) 5/5 (still high: quiet).
	check("first crossing", failEach(names...), nil, nil, nil, []int{4}, nil)

	// Every retry starts at 2s; at 12s the grants of 1s have left the
	// window, so usage fell to 0 before the next grant.
	h.at(2 * time.Second)
	if r := h.tick(); len(r.Start) != len(names) {
		t.Fatalf("retries started: %+v", r.Start)
	}
	h.at(12 * time.Second)
	check("second crossing", failEach(names...), nil, nil, nil, []int{4}, nil)
}

// TestAttemptStartedRetryFacts: the attempt_started of a retry says which
// error it retries and, when a timer started it, when that timer was due
// (metrics count retries by error type and measure timer lateness).
func TestAttemptStartedRetryFacts(t *testing.T) {
	w := &world{wf: workflow(execAct("a", []retry.Rule{{Policy: expo(time.Second, 5)}}))}
	h := newHarness(t, w, nil, t0)
	first := eventsOf(h.start(), event.AttemptStarted)
	if len(first) != 1 || first[0].PreviousError != nil || first[0].ScheduledAt != nil {
		t.Fatalf("first attempt_started = %+v", first)
	}
	h.at(time.Second)
	h.finish("a", fail("http:503"))
	h.at(2*time.Second + 30*time.Millisecond) // the timer of 2s fires late
	st := eventsOf(h.tick(), event.AttemptStarted)
	if len(st) != 1 || st[0].PreviousError == nil || st[0].PreviousError.Type != "http:503" ||
		st[0].ScheduledAt == nil || !st[0].ScheduledAt.Equal(t0.Add(2*time.Second)) {
		t.Fatalf("retry attempt_started = %+v", st)
	}
	// Fired by hand: a retry, but no timer was late.
	h.finish("a", fail("timeout"))
	st = eventsOf(h.record(h.c.FireNow(h.now, addr, "a")), event.AttemptStarted)
	if len(st) != 1 || st[0].PreviousError == nil || st[0].PreviousError.Type != "timeout" || st[0].ScheduledAt != nil {
		t.Fatalf("manual attempt_started = %+v", st)
	}
}

package core

import (
	"testing"
	"time"

	"github.com/wf-engine/wf/config"
	"github.com/wf-engine/wf/executor/event"
	"github.com/wf-engine/wf/retry"
	"github.com/wf-engine/wf/statefile/record"
)

// Nested budgets (SPEC §11): a retry takes a token from its budget and
// every ancestor in one step; any level refuses, waiting or failing as
// the refusing level says.

// chainWorld: activities drawing from budget team (3 a minute), whose
// parent org allows 2 in two minutes.
func chainWorld(orgOnExhausted string, names ...string) *world {
	pol := retry.Policy{Backoff: retry.Fixed, InitialInterval: time.Second, MaximumInterval: time.Second,
		MaximumAttempts: 10, Jitter: retry.Jitter{Mode: retry.JitterNone}, Budget: "team"}
	var acts []*config.Activity
	for _, n := range names {
		acts = append(acts, execAct(n, []retry.Rule{{Policy: pol}}))
	}
	return &world{wf: workflow(acts...), budgets: map[string]retry.Budget{
		"team": {Name: "team", MaxRetries: 3, Window: time.Minute, OnExhausted: "wait", Parent: "org"},
		"org":  {Name: "org", MaxRetries: 2, Window: 2 * time.Minute, OnExhausted: orgOnExhausted},
	}}
}

// TestNestedBudgetTakesEveryLevel: one retry stamps both windows in the
// same batch as the failure; the events carry both levels' usage.
func TestNestedBudgetTakesEveryLevel(t *testing.T) {
	h := newHarness(t, chainWorld("wait", "a"), nil, t0)
	h.start()
	h.at(time.Second)
	r := h.finish("a", fail("exit:1"))
	var names []string
	for _, m := range r.Persist {
		if m.Budget != nil {
			names = append(names, m.Budget.Name)
			if len(m.Budget.Stamps) != 1 || !m.Budget.Stamps[0].Equal(h.now) {
				t.Errorf("budget %s stamps = %v", m.Budget.Name, m.Budget.Stamps)
			}
		}
	}
	if len(names) != 2 {
		t.Fatalf("budget mutations %v, want team and org in the failure's batch", names)
	}
	af := eventsOf(r, event.AttemptFailed)[0]
	if af.Budget == nil || af.Budget.Name != "team" || af.Budget.Used != 1 || af.Budget.Parent == nil ||
		af.Budget.Parent.Name != "org" || af.Budget.Parent.Used != 1 || af.Budget.Parent.MaxRetries != 2 {
		t.Fatalf("attempt_failed budget = %+v", af.Budget)
	}
	// org is now at 1 of 2 (50 %): no warning yet; the next grant takes it
	// to 100 %, and team to 2 of 3 (66 %): one budget_high, for org.
	h.at(2 * time.Second)
	h.tick()
	h.at(3 * time.Second)
	r = h.finish("a", fail("exit:1"))
	high := eventsOf(r, event.BudgetHigh)
	if len(high) != 1 || high[0].Budget.Name != "org" || high[0].Budget.Used != 2 {
		t.Fatalf("budget_high = %+v", high)
	}
}

// TestNestedBudgetParentRefuses: the parent's full window makes the retry
// wait until the parent frees a token, though the child has tokens left.
func TestNestedBudgetParentRefuses(t *testing.T) {
	h := newHarness(t, chainWorld("wait", "a", "b", "c"), nil, t0)
	h.start()
	h.at(time.Second)
	h.finish("a", fail("exit:1"))
	h.finish("b", fail("exit:1"))
	r := h.finish("c", fail("exit:1"))
	bw := eventsOf(r, event.BudgetWait)
	want := t0.Add(time.Second + 2*time.Minute) // org's oldest grant leaves its window
	if len(bw) != 1 || !bw[0].FireAt.Equal(want) {
		t.Fatalf("budget_wait = %+v, want one until %v", bw, want)
	}
	if ex := bw[0].Budget.Exhausted(); ex == nil || ex.Name != "org" {
		t.Fatalf("the refusing level is %+v, want org", ex)
	}
	if team := h.state.budgets["team"]; len(team.Stamps) != 2 {
		t.Fatalf("a refused retry took a team token: %v", team.Stamps)
	}
	rec := h.state.activity(addr, "c")
	if rec.Timer == nil || rec.Timer.Kind != record.TimerBudget || !rec.Timer.FireAt.Equal(want) {
		t.Fatalf("c = %+v", rec.Timer)
	}
}

// TestNestedBudgetParentFails: a refusing parent with on_exhausted =
// "fail" fails the activity, naming the parent.
func TestNestedBudgetParentFails(t *testing.T) {
	h := newHarness(t, chainWorld("fail", "a", "b", "c"), nil, t0)
	h.start()
	h.at(time.Second)
	h.finish("a", fail("exit:1"))
	h.finish("b", fail("exit:1"))
	r := h.finish("c", fail("exit:1"))
	af := eventsOf(r, event.ActivityFailed)
	if len(af) != 1 || af[0].Reason != event.ReasonBudgetExhausted || af[0].Error.Type != "budget_exhausted" {
		t.Fatalf("activity_failed = %+v", af)
	}
	if msg := af[0].Error.Message; msg != "retry budget org (an ancestor of retry budget team) exhausted: 2 of 2 retries used in the last 2m0s" {
		t.Fatalf("message = %q", msg)
	}
}

// TestNestedBudgetSurvivesRestart: both windows are in state; a new core
// refuses from the parent's recorded window.
func TestNestedBudgetSurvivesRestart(t *testing.T) {
	w := chainWorld("wait", "a", "b", "c")
	h := newHarness(t, w, nil, t0)
	h.start()
	h.at(time.Second)
	h.finish("a", fail("exit:1"))
	h.finish("b", fail("exit:1"))
	h2 := newHarness(t, w, h.state, t0.Add(2*time.Second))
	h2.start()
	h2.at(2500 * time.Millisecond)
	r := h2.finish("c", fail("exit:1"))
	if len(eventsOf(r, event.BudgetWait)) != 1 {
		t.Fatalf("after a restart the parent's window was forgotten: %v", types(r))
	}
}

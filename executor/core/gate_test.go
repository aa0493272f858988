package core

import (
	"testing"
	"time"

	"github.com/wf-engine/wf/config"
	"github.com/wf-engine/wf/retry"
	"github.com/wf-engine/wf/statefile/record"
)

// fakeGate grants a token only from a given time on.
type fakeGate struct {
	openAt time.Time
	calls  []bool // force flags, in order
}

func (g *fakeGate) Take(chain []string, now time.Time, force bool) BudgetGrant {
	g.calls = append(g.calls, force)
	if force || !now.Before(g.openAt) {
		return BudgetGrant{OK: true, Used: []int{1}}
	}
	return BudgetGrant{NextFree: g.openAt, Used: []int{1}}
}

// TestBudgetGate: with a gate, the core asks it for every retry token
// instead of its own window, waits until the time it names, and asks again.
func TestBudgetGate(t *testing.T) {
	cfg, diags := config.LoadFiles("/cfg", map[string][]byte{"m.wf.hcl": []byte(`
retry_budget "b" {
  max_retries = 100
  window = "1m"
}
workflow "w" {
  activity "a" {
    exec { command = ["x"] }
    retry {
      backoff = "fixed"
      initial_interval = "1s"
      maximum_attempts = 5
      budget = retry_budget.b
    }
  }
}
`)}, config.LoadOptions{})
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	gate := &fakeGate{openAt: t0.Add(10 * time.Second)}
	c := New(Options{
		Instances:  []Instance{{Workflow: cfg.Workflows[0]}},
		Budgets:    map[string]retry.Budget{"b": cfg.Budgets["b"].Budget},
		BudgetGate: gate,
		Seed:       "s",
	})
	r := c.Start(t0)
	if len(r.Start) != 1 {
		t.Fatalf("started %d attempts", len(r.Start))
	}
	fail := func(now time.Time, n int) Ready {
		return c.AttemptsDone(now, []Result{{Workflow: "w", Instance: "default", Activity: "a", Number: n, End: now, Failure: &retry.Failure{Type: "exit:1"}}})
	}
	r = fail(t0, 1)
	if len(r.Start) != 0 || !r.Wake.Equal(gate.openAt) {
		t.Fatalf("after a refused token: start %d, wake %v; want a budget wait until %v", len(r.Start), r.Wake, gate.openAt)
	}
	var timer *record.Timer
	for _, m := range r.Persist {
		if m.Activity != nil {
			timer = m.Activity.Timer
		}
	}
	if timer == nil || timer.Kind != record.TimerBudget {
		t.Fatalf("timer = %+v, want a budget timer", timer)
	}
	r = c.Tick(gate.openAt)
	if len(r.Start) != 1 || r.Start[0].Number != 2 {
		t.Fatalf("once the gate grants: start %+v, want attempt 2", r.Start)
	}
	if len(gate.calls) != 2 || gate.calls[0] || gate.calls[1] {
		t.Fatalf("gate calls = %v, want two unforced takes", gate.calls)
	}
}

package core

import (
	"fmt"

	"github.com/wf-engine/wf/executor/event"
	"github.com/wf-engine/wf/retry"
	"github.com/wf-engine/wf/statefile/record"
)

// Retry budgets (SPEC §2, §11). A budget is a gate asked when a retry is
// decided: the retry takes a token from the budget and from every
// ancestor (parent = retry_budget.NAME) in the same step, so in one
// commit; it is refused when any level refuses, and then waits or fails
// as the refusing level says.

type budgetState struct {
	cfg   retry.Budget
	rec   *record.Budget
	dirty bool
	high  bool // budget_high was emitted and usage has not fallen below 80 % since
	// used is what the remote gate last said the window holds.
	used int
}

// budgetGate is a budget with its ancestors, the gate of the rules that
// draw from it. With Options.BudgetGate the windows are kept elsewhere
// (the Temporal engine's cluster-wide budgets) and the gate asks there;
// otherwise they are in state, in budgetState.rec.
type budgetGate struct {
	levels []*budgetState // the budget, its parent, ... up to the root
	names  []string
	ls     []retry.Level // scratch for AllowChain
}

func (c *Core) newBudgetGate(name string) *budgetGate {
	g := &budgetGate{}
	for cur := name; cur != "" && len(g.levels) <= len(c.budgets); {
		b := c.budgets[cur]
		if b == nil {
			break
		}
		g.levels = append(g.levels, b)
		g.names = append(g.names, cur)
		cur = b.cfg.Parent
	}
	g.ls = make([]retry.Level, len(g.levels))
	return g
}

func (g *budgetGate) timerKind() record.TimerKind { return record.TimerBudget }

// ask takes a token at every level. force (an operator's retry) takes
// them even from full windows; budgets never fail fast on their own:
// on_exhausted says what a refusal does.
func (g *budgetGate) ask(c *Core, a *act, opts askOpts) verdict {
	before := make([]int, 0, 4) // retries in each window just before the grant
	if rg := c.opts.BudgetGate; rg != nil {
		grant := rg.Take(g.names, c.now, opts.force)
		for i, b := range g.levels {
			if i < len(grant.Used) {
				b.used = grant.Used[i]
			}
		}
		if !grant.OK {
			i := min(max(grant.Refused, 0), len(g.levels)-1)
			b := g.levels[i]
			if b.cfg.OnExhausted == "fail" || grant.NextFree.IsZero() {
				return g.refusal(c, i)
			}
			return verdict{kind: waitUntil, at: grant.NextFree}
		}
		for _, b := range g.levels {
			before = append(before, b.used-1)
		}
	} else {
		for i, b := range g.levels {
			g.ls[i] = retry.Level{Budget: b.cfg, Stamps: b.rec.Stamps}
		}
		if d := retry.AllowChain(g.ls, c.now); !d.OK && !opts.force {
			if d.Fail {
				return g.refusal(c, d.Refused)
			}
			return verdict{kind: waitUntil, at: d.NextFree}
		}
		for _, b := range g.levels {
			live := b.cfg.Prune(b.rec.Stamps, c.now)
			before = append(before, len(live))
			b.rec.Stamps = append(live, c.now)
			b.dirty = true
		}
	}
	// A grant that lifts a level's usage to 80 % or more emits
	// budget_high for that level, once per crossing. Usage only rises
	// with a grant, so it fell below 80 % since the last warning iff it
	// is below just before this one.
	for i, b := range g.levels {
		high := func(used int) bool { return used*100 >= b.cfg.MaxRetries*80 }
		b.high = b.high && high(before[i])
		if !b.high && high(c.used(b)) {
			b.high = true
			ev := c.ev(a, event.BudgetHigh)
			ev.Budget = c.usageOf(b.cfg.Name)
			c.emit(ev)
		}
	}
	return verdict{kind: goNow}
}

// refusal fails the activity because level i is exhausted.
func (g *budgetGate) refusal(c *Core, i int) verdict {
	b := g.levels[i]
	name := b.rec.Name
	if i > 0 {
		name += fmt.Sprintf(" (an ancestor of retry budget %s)", g.names[0])
	}
	return verdict{kind: never, reason: event.ReasonBudgetExhausted, err: record.Error{
		Type:    "budget_exhausted",
		Message: fmt.Sprintf("retry budget %s exhausted: %d of %d retries used in the last %s", name, c.used(b), b.cfg.MaxRetries, b.cfg.Window),
	}}
}

// cancel: a budget is its stage's only gate, so a token it granted is
// always used.
func (g *budgetGate) cancel(*Core, *act, int) {}

// done: a budget counts grants, not outcomes.
func (g *budgetGate) done(*Core, *act, int, attemptEnd) {}

func (g *budgetGate) waitEvent(c *Core, a *act, _ verdict) event.Event {
	t := a.rec.Timer
	ev := c.ev(a, event.BudgetWait)
	ev.Attempt = t.Attempt
	ev.FireAt = timePtr(t.FireAt)
	ev.DelayMs = event.Ms(t.FireAt.Sub(c.now))
	ev.DelaySource = event.SourceBudget
	return ev
}

// budgetGateOf is the gate of the budget a retry rule draws from, nil for
// none.
func (c *Core) budgetGateOf(name string) *budgetGate {
	if name == "" {
		return nil
	}
	return c.budgetGates[name]
}

// used is how many retries the budget's window holds.
func (c *Core) used(b *budgetState) int {
	if c.opts.BudgetGate != nil {
		return b.used
	}
	return b.cfg.Used(b.rec.Stamps, c.now)
}

// usage is the usage of the budget shown on a's events, with its
// ancestors.
func (c *Core) usage(a *act) *event.BudgetUsage { return c.usageOf(a.budget) }

func (c *Core) usageOf(name string) *event.BudgetUsage {
	var head *event.BudgetUsage
	link := &head
	for depth := 0; name != "" && depth <= len(c.budgets); depth++ {
		b := c.budgets[name]
		if b == nil {
			break
		}
		u := &event.BudgetUsage{
			Name:       b.cfg.Name,
			Used:       c.used(b),
			MaxRetries: b.cfg.MaxRetries,
			WindowMs:   b.cfg.Window.Milliseconds(),
			// A grant replaces the slice and never writes into it: safe
			// to share.
			Stamps: b.rec.Stamps[:len(b.rec.Stamps):len(b.rec.Stamps)],
		}
		*link = u
		link = &u.Parent
		name = b.cfg.Parent
	}
	return head
}

package core

import (
	"fmt"
	"time"

	"github.com/wf-engine/wf/executor/event"
	"github.com/wf-engine/wf/statefile/record"
)

func (c *Core) failBudget(a *act, b *budgetState) {
	c.fail(a, event.ReasonBudgetExhausted, record.Error{
		Type:    "budget_exhausted",
		Message: fmt.Sprintf("retry budget %s exhausted: %d of %d retries used in the last %s", b.rec.Name, c.used(b), b.cfg.MaxRetries, b.cfg.Window),
	})
}

func (c *Core) emitBudgetWait(a *act) {
	t := a.rec.Timer
	ev := c.ev(a, event.BudgetWait)
	ev.Attempt = t.Attempt
	ev.FireAt = timePtr(t.FireAt)
	ev.DelayMs = event.Ms(t.FireAt.Sub(c.now))
	ev.DelaySource = "budget"
	c.emit(ev)
}

// ---- budgets ------------------------------------------------------------

// take asks for one retry token: from the gate when there is one (the
// cluster-wide budgets of the Temporal engine), else from the budget's own
// window. force takes it even from a full window (an operator's retry). A
// grant that lifts usage to 80 % or more emits budget_high, once per
// crossing.
func (c *Core) take(a *act, b *budgetState, force bool) (ok bool, nextFree time.Time) {
	var before int // retries in the window just before this grant
	if g := c.opts.BudgetGate; g != nil {
		if ok, nextFree, b.used = g.Take(b.rec.Name, c.now, force); !ok {
			return false, nextFree
		}
		before = b.used - 1
	} else {
		if !force {
			if ok, nextFree = b.cfg.Allow(b.rec.Stamps, c.now); !ok {
				return false, nextFree
			}
		}
		live := b.cfg.Prune(b.rec.Stamps, c.now)
		before = len(live)
		b.rec.Stamps = append(live, c.now)
		b.dirty = true
	}
	high := func(used int) bool { return used*100 >= b.cfg.MaxRetries*80 }
	// Usage only rises with a grant, so it fell below 80 % since the last
	// warning iff it is below just before this one.
	b.high = b.high && high(before)
	if !b.high && high(c.used(b)) {
		b.high = true
		c.emit(c.ev(a, event.BudgetHigh))
	}
	return true, time.Time{}
}

// used is how many retries the budget's window holds.
func (c *Core) used(b *budgetState) int {
	if c.opts.BudgetGate != nil {
		return b.used
	}
	return b.cfg.Used(b.rec.Stamps, c.now)
}

func (c *Core) usage(a *act) *event.BudgetUsage {
	b := c.budgets[a.budget]
	if b == nil {
		return nil
	}
	return &event.BudgetUsage{
		Name:       b.cfg.Name,
		Used:       c.used(b),
		MaxRetries: b.cfg.MaxRetries,
		WindowMs:   b.cfg.Window.Milliseconds(),
		// stamp replaces the slice and never writes into it: safe to share.
		Stamps: b.rec.Stamps[:len(b.rec.Stamps):len(b.rec.Stamps)],
	}
}

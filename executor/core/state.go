package core

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/wf-engine/wf/config"
	"github.com/wf-engine/wf/executor/event"
	"github.com/wf-engine/wf/statefile/record"
)

// The stored records of an instance are matched with the configuration
// when the run starts: moved blocks rename records (the state, attempts,
// pending timer and idempotency key carry over to the new name), and a
// record no activity or element of the configuration claims is forgotten
// (SPEC §10), its pending retry or sleep cancelled. Elements of an
// activity whose for_each becomes known only during the run are matched
// when it expands.

// applyMoves renames the records the moved blocks carry over and returns
// the instance's records as the configuration names them.
func (c *Core) applyMoves(in *inst, stored map[string]*record.Activity) map[string]*record.Activity {
	if len(in.wf.Moved) == 0 || len(stored) == 0 {
		return stored
	}
	names := make(map[string]bool, len(stored))
	for n := range stored {
		names[n] = true
	}
	renames, _ := in.wf.Renames(names)
	if len(renames) == 0 {
		return stored
	}
	state := maps.Clone(stored)
	for _, r := range renames {
		rec := copyActivity(state[r.From])
		delete(state, r.From)
		rec.Name = r.To
		state[r.To] = &rec
		in.settle = append(in.settle, record.Mutation{RenameActivity: &record.ActivityRename{
			Workflow: in.wf.Name, Key: in.wf.Key, From: r.From, To: r.To,
		}})
		in.settleEv = append(in.settleEv, event.Event{
			Type: event.ActivityMoved, Workflow: in.wf.Name, Instance: in.addr,
			Activity: "activity." + r.To, From: "activity." + r.From,
		})
		// What the shell found of a running attempt follows the record.
		if att := c.opts.Running[in.addr][r.From]; att != nil {
			cp := *att
			cp.Activity = r.To
			c.opts.Running[in.addr][r.To] = &cp
			delete(c.opts.Running[in.addr], r.From)
		}
		if o, ok := c.opts.Orphans[in.addr][r.From]; ok {
			c.opts.Orphans[in.addr][r.To] = o
			delete(c.opts.Orphans[in.addr], r.From)
		}
	}
	return state
}

// settleState persists the renames and forgets the records of activities
// no longer in the configuration; called by Start.
func (c *Core) settleState(in *inst) {
	c.out.Persist = append(c.out.Persist, in.settle...)
	for _, ev := range in.settleEv {
		ev.Time = c.now
		c.emit(ev)
	}
	in.settle, in.settleEv = nil, nil
	// Only the records no activity or element claims are looked at, in
	// name order: a state of 100,000 claimed records sorts nothing.
	if in.claimed == len(in.state) {
		// Every record has the node of its name (no two nodes share a
		// name): none to forget, and no need to look each one up.
		return
	}
	var unclaimed []string
	for name := range in.state {
		if n := in.byName[name]; n == nil || n.grp != nil {
			unclaimed = append(unclaimed, name)
		}
	}
	slices.Sort(unclaimed)
	for _, name := range unclaimed {
		block, _, isElem := config.SplitName(name)
		n := in.byName[name]
		switch {
		case isElem:
			switch g := in.byName[block]; {
			case g == nil:
				c.forget(in, name, ReasonRemoved)
			case g.grp == nil:
				c.forget(in, name, ReasonForEachRemoved)
			case !g.grp.expanded:
				// Decided when the group expands.
			default:
				c.forget(in, name, ReasonNotInForEach)
			}
		case n != nil:
			// Declared with for_each now: its elements have names of
			// their own.
			c.forget(in, name, ReasonForEachAdded)
		default:
			c.forget(in, name, ReasonRemoved)
		}
	}
}

// forgetStaleElements forgets the stored elements of group block that
// its for_each no longer has.
func (c *Core) forgetStaleElements(in *inst, block string, keep map[string]bool) {
	for _, name := range slices.Sorted(maps.Keys(in.state)) {
		if b, _, isElem := config.SplitName(name); isElem && b == block && !keep[name] {
			c.forget(in, name, ReasonNotInForEach)
		}
	}
}

// Reasons of activity_removed events.
const (
	// ReasonRemoved: the activity is no longer in the configuration.
	ReasonRemoved = "removed_from_configuration"
	// ReasonNotInForEach: the element's key is no longer in for_each.
	ReasonNotInForEach = "not_in_for_each"
	// ReasonForEachAdded: the activity has for_each now, so its state as
	// a single activity is forgotten (a moved block can keep it for one
	// element).
	ReasonForEachAdded = "for_each_added"
	// ReasonForEachRemoved: the activity has no for_each any more, so
	// its elements are forgotten.
	ReasonForEachRemoved = "for_each_removed"
)

// forget deletes a record and says so, with what was cancelled with it.
// A record whose attempt's processes survived (the shell could not end
// them) is kept: forgetting it would lose track of them.
func (c *Core) forget(in *inst, name, reason string) {
	r := in.state[name]
	if r == nil {
		return
	}
	if o, ok := c.opts.Orphans[in.addr][name]; ok && (len(o.Survivors) > 0 || o.Err != "") {
		return
	}
	delete(in.state, name)
	c.out.Persist = append(c.out.Persist, record.Mutation{DeleteActivity: &record.ActivityRef{Workflow: in.wf.Name, Key: in.wf.Key, Name: name}})
	ev := event.Event{Time: c.now, Type: event.ActivityRemoved, Workflow: in.wf.Name, Instance: in.addr, Activity: "activity." + name, Reason: reason}
	if note := cancelled(r, c.now); note != "" {
		ev.Error = &event.Error{Type: "cancelled", Message: note}
	}
	c.emit(ev)
}

// cancelled says what forgetting r cancels: a pending retry, a sleep, an
// attempt cut short; "" for an activity that had ended.
func cancelled(r *record.Activity, now time.Time) string {
	if t := r.Timer; t != nil {
		due := "due now"
		if d := t.FireAt.Sub(now); d > 0 {
			due = "due in " + d.Round(time.Second).String()
		}
		switch t.Kind {
		case record.TimerSleep:
			return fmt.Sprintf("its sleep (until %s) was cancelled", t.FireAt.UTC().Format(time.RFC3339))
		case record.TimerBudget:
			return fmt.Sprintf("its pending retry (attempt %d, waiting for the retry budget, %s) was cancelled", t.Attempt, due)
		default:
			return fmt.Sprintf("its pending retry (attempt %d, %s) was cancelled", t.Attempt, due)
		}
	}
	switch r.Status {
	case record.StatusRunning:
		return fmt.Sprintf("attempt %d was running when wf stopped; it is not resumed", max(r.Attempts, 1))
	case record.StatusPending:
		return "it had not started; it will not run"
	}
	return ""
}

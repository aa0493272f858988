package core

import (
	"container/heap"
	"encoding/json"
	"time"

	"github.com/wf-engine/wf/executor/event"
	"github.com/wf-engine/wf/statefile/record"
)

// ---- timers -------------------------------------------------------------

func (c *Core) armTimer(a *act) {
	a.phase = phaseTimer
	if c.bulkTimers {
		// Start-up: the heap is built once, by heap.Init in buildTimers.
		c.timers.Push(a)
		return
	}
	heap.Push(&c.timers, a)
}

// buildTimers ends start-up's arming: a state recovered with 100,000
// timers builds the heap in one linear pass instead of 100,000 pushes.
// The order they fire in is the same: (fire time, activity order) is a
// total order, so any valid heap pops them alike.
func (c *Core) buildTimers() {
	if c.bulkTimers {
		c.bulkTimers = false
		heap.Init(&c.timers)
	}
}

// fireDue fires every timer due at c.now, earliest first.
func (c *Core) fireDue() {
	if c.stopped {
		return
	}
	c.tickBreakers()
	now := fireKeyOf(c.now)
	for c.timers.Len() > 0 && !now.before(c.timers[0].at) {
		a := heap.Pop(&c.timers).(*act)
		c.fire(a)
	}
}

func (c *Core) fire(a *act) {
	t := a.rec.Timer
	switch t.Kind {
	case record.TimerSleep:
		if a.cur == nil {
			// Restarted mid-sleep: the attempt record began when the
			// timer was set.
			r := a.rec
			a.cur = &record.Attempt{
				Workflow: r.Workflow, Instance: r.Instance, Activity: r.Name,
				Generation: r.Generation, Number: t.Attempt, IdempotencyKey: r.IdempotencyKey,
				Start: t.Set, Outcome: record.OutcomeRunning,
			}
		}
		c.succeed(a, json.RawMessage(`{}`), c.now)
	case record.TimerBudget:
		if g := c.budgetGateOf(a.budget); g != nil {
			switch v := g.ask(c, a, askOpts{}); v.kind {
			case never:
				c.fail(a, v.reason, v.err)
				return
			case waitUntil:
				t.FireAt = v.at
				c.markAct(a)
				c.armTimer(a)
				c.emit(g.waitEvent(c, a, v))
				return
			}
		}
		if due := t.Set.Add(t.Delay); due.After(c.now) {
			t.Kind = record.TimerRetry
			t.FireAt = due
			c.markAct(a)
			c.armTimer(a)
			ev := c.ev(a, event.RetryScheduled)
			ev.Attempt = t.Attempt
			ev.DelayMs = event.Ms(due.Sub(c.now))
			ev.DelaySource = t.Source
			ev.FireAt = timePtr(due)
			c.emit(ev)
			return
		}
		c.enqueue(a, t.Attempt, "")
	default:
		c.enqueue(a, t.Attempt, "")
	}
}

// ---- heaps --------------------------------------------------------------

// timerHeap orders armed timers by fire time, then by activity order, so
// timers due together fire in a deterministic order. Each entry carries
// its sort key, taken when the timer is armed (a timer's FireAt changes
// only while it is out of the heap), so that comparing two entries reads
// no activity: recovering 100,000 timers pops them all at once.
type timerHeap []timerEntry

type timerEntry struct {
	at    fireKey
	order int
	a     *act
}

// fireKey is a fire time as seconds and nanoseconds: cheaper to compare
// than a time.Time, and with no range limit as UnixNano has.
type fireKey struct {
	sec  int64
	nsec int32
}

func fireKeyOf(t time.Time) fireKey { return fireKey{t.Unix(), int32(t.Nanosecond())} }

func (k fireKey) before(o fireKey) bool {
	return k.sec < o.sec || k.sec == o.sec && k.nsec < o.nsec
}

func (h timerHeap) Len() int { return len(h) }
func (h timerHeap) Less(i, j int) bool {
	if h[i].at != h[j].at {
		return h[i].at.before(h[j].at)
	}
	return h[i].order < h[j].order
}
func (h timerHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].a.heapIdx = i
	h[j].a.heapIdx = j
}
func (h *timerHeap) Push(x any) {
	a := x.(*act)
	a.heapIdx = len(*h)
	*h = append(*h, timerEntry{at: fireKeyOf(a.rec.Timer.FireAt), order: a.order, a: a})
}
func (h *timerHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = timerEntry{}
	*h = old[:len(old)-1]
	e.a.heapIdx = -1
	return e.a
}

// readyQueue orders activities waiting for a slot by activity order.
type readyQueue []*act

func (q readyQueue) Len() int           { return len(q) }
func (q readyQueue) Less(i, j int) bool { return q[i].order < q[j].order }
func (q readyQueue) Swap(i, j int) {
	q[i], q[j] = q[j], q[i]
	q[i].qIdx = i
	q[j].qIdx = j
}
func (q *readyQueue) Push(x any) {
	a := x.(*act)
	a.qIdx = len(*q)
	*q = append(*q, a)
}
func (q *readyQueue) Pop() any {
	old := *q
	a := old[len(old)-1]
	old[len(old)-1] = nil
	*q = old[:len(old)-1]
	a.qIdx = -1
	return a
}

type intHeap []int

func (h intHeap) Len() int           { return len(h) }
func (h intHeap) Less(i, j int) bool { return h[i] < h[j] }
func (h intHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *intHeap) Push(x any)        { *h = append(*h, x.(int)) }
func (h *intHeap) Pop() any {
	old := *h
	v := old[len(old)-1]
	*h = old[:len(old)-1]
	return v
}

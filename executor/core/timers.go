package core

import (
	"container/heap"
	"encoding/json"
	"slices"
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
//
// The heap is built sorted (a sorted array is a heap), so that the first
// fireDue can take the timers already due as one run off its front
// (fireSortedDue) instead of popping them one by one: after a long stop
// they are most of them.
func (c *Core) buildTimers() {
	if c.bulkTimers {
		c.bulkTimers = false
		slices.SortFunc(c.timers, func(x, y timerEntry) int {
			switch {
			case x.before(y):
				return -1
			case y.before(x):
				return 1
			}
			return 0
		})
		for i, e := range c.timers {
			e.a.heapIdx = i
		}
		c.sortedTimers = true
	}
}

// fireDue fires every timer due at c.now, earliest first.
func (c *Core) fireDue() {
	// Only the first call after buildTimers may take the heap for the
	// sorted array, even when it fires nothing.
	sorted := c.sortedTimers
	c.sortedTimers = false
	if c.stopped {
		return
	}
	c.tickBreakers()
	now := fireKeyOf(c.now)
	if sorted {
		c.fireSortedDue(now)
	}
	for c.timers.Len() > 0 && !now.before(c.timers[0].at) {
		a := heap.Pop(&c.timers).(*act)
		c.fire(a)
	}
}

// fireSortedDue is the loop of fireDue over a heap that is still the
// sorted array buildTimers made: the due timers are its front, cut off at
// once; the rest stays a sorted array, hence a heap. Firing one may arm a
// timer that is already due (a zero sleep downstream): such a timer, in
// the heap, fires as soon as it is the earliest, exactly as when every
// timer is popped in turn, since the front cut off is sorted too.
func (c *Core) fireSortedDue(now fireKey) {
	h := c.timers
	n, _ := slices.BinarySearchFunc(h, now, func(e timerEntry, now fireKey) int {
		if now.before(e.at) {
			return 1
		}
		return -1 // due: at <= now
	})
	due := h[:n:n]
	c.timers = h[n:]
	for i, e := range c.timers {
		e.a.heapIdx = i
	}
	// Most due timers queue their activity: room for all of them at once
	// rather than the queue grown a score of times (100,000 at recovery).
	c.queue = slices.Grow(c.queue, len(due))
	for i := 0; i < len(due); {
		if c.timers.Len() > 0 && !now.before(c.timers[0].at) && c.timers[0].before(due[i]) {
			c.fire(heap.Pop(&c.timers).(*act))
			continue
		}
		a := due[i].a
		due[i] = timerEntry{}
		i++
		a.heapIdx = -1
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

func (h timerHeap) Len() int           { return len(h) }
func (h timerHeap) Less(i, j int) bool { return h[i].before(h[j]) }

// before orders entries by fire time, then activity order.
func (e timerEntry) before(o timerEntry) bool {
	if e.at != o.at {
		return e.at.before(o.at)
	}
	return e.order < o.order
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

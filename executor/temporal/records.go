package temporal

import (
	"time"

	"github.com/wf-engine/wf/executor/event"
	"github.com/wf-engine/wf/statefile/record"
)

// records is the interpreter's copy of what the local engine keeps in
// Badger: the core's mutations are applied to it instead of committed. It
// is answered to queries, carried across continue-as-new and returned as
// the run's result, so every wf command can read an instance from Temporal.
type records struct {
	instance   *record.Instance
	activities map[string]*record.Activity
	budgets    map[string]*record.Budget
	// breakers are kept per instance: on Temporal a breaker is shared
	// by the activities of one instance and across its applies, not yet
	// by every instance on the cluster (docs/temporal.md).
	breakers map[string]*record.Breaker
	attempts []*record.Attempt
	index    map[attemptKey]int
	dropped  int
	maxKept  int
}

type attemptKey struct {
	activity   string
	generation int
	number     int
}

func newRecords(c Carry, maxKept int) *records {
	r := &records{
		instance:   c.Instance,
		activities: map[string]*record.Activity{},
		budgets:    map[string]*record.Budget{},
		breakers:   map[string]*record.Breaker{},
		index:      map[attemptKey]int{},
		dropped:    c.DroppedAttempts,
		maxKept:    maxKept,
	}
	for name, a := range c.Activities {
		cp := *a
		r.activities[name] = &cp
	}
	for name, b := range c.Budgets {
		cp := *b
		r.budgets[name] = &cp
	}
	for name, b := range c.Breakers {
		cp := *b
		r.breakers[name] = &cp
	}
	for _, a := range c.Attempts {
		r.putAttempt(a)
	}
	return r
}

// apply applies one step's mutations, as statefile.Commit would.
func (r *records) apply(ms []record.Mutation) {
	for _, m := range ms {
		switch {
		case m.Instance != nil:
			cp := *m.Instance
			r.instance = &cp
		case m.Activity != nil:
			cp := *m.Activity
			r.activities[cp.Name] = &cp
		case m.Attempt != nil:
			r.putAttempt(m.Attempt)
		case m.Budget != nil:
			cp := *m.Budget
			r.budgets[cp.Name] = &cp
		case m.Breaker != nil:
			cp := *m.Breaker
			r.breakers[cp.Name] = &cp
		}
	}
}

func (r *records) putAttempt(a *record.Attempt) {
	cp := *a
	k := attemptKey{cp.Activity, cp.Generation, cp.Number}
	if i, ok := r.index[k]; ok {
		r.attempts[i] = &cp
		return
	}
	if r.maxKept > 0 && len(r.attempts) >= r.maxKept {
		// Drop the oldest finished half at once so that dropping stays
		// rare; what is left keeps its order.
		n := len(r.attempts) / 2
		r.attempts = append([]*record.Attempt(nil), r.attempts[n:]...)
		r.dropped += n
		clear(r.index)
		for i, a := range r.attempts {
			r.index[attemptKey{a.Activity, a.Generation, a.Number}] = i
		}
	}
	r.index[k] = len(r.attempts)
	r.attempts = append(r.attempts, &cp)
}

// State is an instance's records as Temporal keeps them: the answer to
// QueryState and the result of a finished run.
type State struct {
	StateID    string                      `json:"state_id"`
	Instance   *record.Instance            `json:"instance,omitempty"`
	Activities map[string]*record.Activity `json:"activities"`
	Budgets    map[string]*record.Budget   `json:"budgets,omitempty"`
	Breakers   map[string]*record.Breaker  `json:"breakers,omitempty"`
	// Attempts is the attempt log, oldest first; DroppedAttempts older
	// ones were dropped to bound it.
	Attempts        []*record.Attempt `json:"attempts,omitempty"`
	DroppedAttempts int               `json:"dropped_attempts,omitempty"`
	// Done is set once the run has ended; Status and Summary say how.
	Done    bool           `json:"done"`
	Status  string         `json:"status,omitempty"`
	Summary *event.Summary `json:"summary,omitempty"`
	// NextSeq is the sequence number the next event would get; Events the
	// last events of a finished run, so a follower sees how it ended.
	NextSeq int64         `json:"next_seq"`
	Events  []event.Event `json:"events,omitempty"`
	Plan    *event.Event  `json:"plan,omitempty"`
	// Runs is how many Temporal runs this apply took (continue-as-new).
	Runs int `json:"runs"`
}

// Carry returns what a following run starts from.
func (s *State) Carry() Carry {
	return Carry{
		Instance:        s.Instance,
		Activities:      s.Activities,
		Budgets:         s.Budgets,
		Breakers:        s.Breakers,
		Attempts:        s.Attempts,
		DroppedAttempts: s.DroppedAttempts,
	}
}

func (r *records) state() *State {
	s := &State{
		Instance:        r.instance,
		Activities:      r.activities,
		Budgets:         r.budgets,
		Breakers:        r.breakers,
		Attempts:        r.attempts,
		DroppedAttempts: r.dropped,
	}
	return s
}

// eventLog keeps the last events of a run, numbered from 1, and the
// latest plan event apart (it is not numbered): every follower's first
// page starts with it, so a view can lay out its rows.
type eventLog struct {
	plan  *event.Event
	ring  []event.Event
	first int64 // sequence number of ring[0]
	next  int64 // sequence number of the next event
	max   int
}

func newEventLog(c Carry, limit int) *eventLog {
	l := &eventLog{max: limit, next: 1, first: 1}
	if c.Continued && c.NextSeq > 0 {
		l.plan = c.Plan
		l.next = c.NextSeq
		l.ring = append(l.ring, c.Events...)
		l.first = c.NextSeq - int64(len(c.Events))
	}
	return l
}

func (l *eventLog) add(evs []event.Event) {
	for _, ev := range evs {
		if ev.Type == event.Plan {
			cp := ev
			l.plan = &cp
			continue
		}
		l.ring = append(l.ring, ev)
		l.next++
	}
	if over := len(l.ring) - l.max; over > 0 {
		// Copy rather than reslice, so the dropped events can be freed.
		l.ring = append([]event.Event(nil), l.ring[over:]...)
		l.first += int64(over)
	}
}

// tail returns the last n events.
func (l *eventLog) tail(n int) []event.Event {
	n = min(n, len(l.ring))
	return append([]event.Event(nil), l.ring[len(l.ring)-n:]...)
}

// EventsPage is the answer to QueryEvents.
type EventsPage struct {
	// Events follow the requested sequence number, at most the page size;
	// a first page (after 0) starts with the plan event.
	Events []event.Event `json:"events"`
	// Next is the sequence number to ask for next (the "after" argument).
	Next int64 `json:"next"`
	// Reset is set when events the follower asked for were dropped: Events
	// then starts with the plan event and the oldest events kept, as for a
	// new follower.
	Reset bool `json:"reset,omitempty"`
	// More is set when more events are ready.
	More bool `json:"more,omitempty"`
	// Done is set when the run has ended and this page holds its last
	// event.
	Done bool `json:"done,omitempty"`
}

// page answers "the events after sequence number after" (0: from the
// start), at most limit of them.
func (l *eventLog) page(after int64, limit int, done bool) EventsPage {
	var p EventsPage
	if after <= 0 || after+1 < l.first {
		p.Reset = after > 0
		if l.plan != nil {
			p.Events = append(p.Events, *l.plan)
		}
		after = l.first - 1
	}
	start := int(after + 1 - l.first)
	start = min(max(start, 0), len(l.ring))
	end := min(len(l.ring), start+limit)
	p.Events = append(p.Events, l.ring[start:end]...)
	p.Next = l.first + int64(end) - 1
	p.More = end < len(l.ring)
	p.Done = done && !p.More
	return p
}

// times bounds a reported attempt end to what the workflow knows.
func clampEnd(end, start, now time.Time) time.Time {
	if end.IsZero() || end.Before(start) || end.After(now) {
		return now
	}
	return end
}

// maxPage bounds the events of one QueryEvents answer, well below
// Temporal's payload limits.
const maxPage = 1000

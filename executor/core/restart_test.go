package core

import (
	"slices"
	"testing"
	"time"

	"github.com/wf-engine/wf/executor/event"
	"github.com/wf-engine/wf/retry"
	"github.com/wf-engine/wf/statefile/record"
)

// What the core does with the state a crash left: running attempts
// ended as interrupted, recorded timers fired at their times, durable
// sleeps carried across a restart.

// TestRecoverRunning: an attempt found running after a crash is recorded as
// interrupted, with its real start, and retried under the policy.
func TestRecoverRunning(t *testing.T) {
	w := &world{wf: workflow(execAct("a", []retry.Rule{{Policy: expo(time.Second, 5)}}))}
	st := newMemState()
	started := t0.Add(-3 * time.Second)
	st.acts[addr] = map[string]*record.Activity{"a": {
		Workflow: "order", Instance: "k1", Name: "a", Generation: 2, IdempotencyKey: "wf2-kept",
		Status: record.StatusRunning, Attempts: 2, RuleCounts: []int{1}, FirstStart: t0.Add(-10 * time.Second), LastDelay: time.Second,
	}}
	w.modes = map[string]Mode{"a": ModeResume}
	h := newHarness(t, w, st, t0)
	h.c = New(withRunning(h.opts, map[string]map[string]*record.Attempt{addr: {"a": {
		Workflow: "order", Instance: "k1", Activity: "a", Generation: 2, Number: 2, IdempotencyKey: "wf2-kept",
		Start: started, Outcome: record.OutcomeRunning, FiredBy: "manual",
	}}}))
	r := h.start()
	if got := types(r); !slices.Equal(got, []event.Type{event.Plan, event.AttemptFailed, event.RetryScheduled, event.AttemptStarted}) {
		t.Fatalf("events = %v", got)
	}
	af := eventsOf(r, event.AttemptFailed)[0]
	if af.Attempt != 2 || af.Error.Type != "interrupted" {
		t.Fatalf("attempt_failed = %+v", af)
	}
	rs := eventsOf(r, event.RetryScheduled)[0]
	if rs.Attempt != 3 || *rs.DelayMs != 0 || rs.DelaySource != event.SourceInterrupted {
		t.Fatalf("retry_scheduled = %+v (an interrupted attempt is resumed at once)", rs)
	}
	att := st.attempts[attKey(addr, "a", 2, 2)]
	if att == nil || att.Outcome != record.OutcomeInterrupted || !att.Start.Equal(started) || !att.End.Equal(t0) || att.Error.Type != "interrupted" || att.FiredBy != "manual" {
		t.Fatalf("attempt record = %+v", att)
	}
	if plan := eventsOf(r, event.Plan)[0]; plan.Activities[0].Action != "resume" || plan.Activities[0].Attempts != 2 {
		t.Fatalf("plan = %+v", plan.Activities)
	}
	if len(r.Start) != 1 || r.Start[0].Number != 3 || r.Start[0].IdempotencyKey != "wf2-kept" {
		t.Fatalf("resume start = %+v (key must survive the resume)", r.Start)
	}
	if rec := st.activity(addr, "a"); rec.Interrupted != 1 || !slices.Equal(rec.RuleCounts, []int{1}) || rec.LastDelay != time.Second {
		t.Fatalf("record after the resume = %+v: the interrupted attempt must be counted apart, rules and previous wait untouched", rec)
	}
}

func TestRecoverTimers(t *testing.T) {
	tests := []struct {
		name   string
		fireAt time.Time
		kind   record.TimerKind
		start  bool
	}{
		{"due retry fires at once", t0.Add(-time.Second), record.TimerRetry, true},
		{"retry due exactly now fires", t0, record.TimerRetry, true},
		{"future retry kept at recorded time", t0.Add(30 * time.Second), record.TimerRetry, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := &world{wf: workflow(execAct("a", []retry.Rule{{Policy: expo(time.Minute, 5)}})), modes: map[string]Mode{"a": ModeResume}}
			st := newMemState()
			st.acts[addr] = map[string]*record.Activity{"a": {
				Workflow: "order", Instance: "k1", Name: "a", Generation: 1, IdempotencyKey: "wf1-x",
				Status: record.StatusWaiting, Attempts: 1, FirstStart: t0.Add(-time.Minute),
				Timer: &record.Timer{Kind: tt.kind, FireAt: tt.fireAt, Attempt: 2, Set: t0.Add(-time.Minute), Delay: time.Minute, Source: "policy"},
			}}
			h := newHarness(t, w, st, t0)
			r := h.start()
			tr := eventsOf(r, event.TimerRecovered)
			if len(tr) != 1 || !tr[0].FireAt.Equal(tt.fireAt) || tr[0].Attempt != 2 {
				t.Fatalf("timer_recovered = %+v", tr)
			}
			if got := len(r.Start) == 1; got != tt.start {
				t.Fatalf("started at once = %v, want %v", got, tt.start)
			}
			if !tt.start {
				if !r.Wake.Equal(tt.fireAt) {
					t.Fatalf("wake %v, want the recorded %v", r.Wake, tt.fireAt)
				}
				if len(r.Persist) != 1 || r.Persist[0].Instance == nil {
					t.Fatalf("a kept timer must not be rewritten: %+v", r.Persist)
				}
				h.now = tt.fireAt
				if r = h.tick(); len(r.Start) != 1 || r.Start[0].Number != 2 {
					t.Fatalf("tick at recorded time: %+v", r.Start)
				}
			}
		})
	}
}

// TestSleepAcrossRestart: a sleep is a durable timer; a new core built from
// the committed state wakes at the original time.
func TestSleepAcrossRestart(t *testing.T) {
	w := &world{wf: workflow(execAct("a", nil), sleepAct("cool", "a"), execAct("b", nil, "cool")), sleeps: map[string]time.Duration{"cool": 10 * time.Minute}}
	h := newHarness(t, w, nil, t0)
	h.start()
	h.at(time.Second)
	r := h.finish("a", nil)
	fireAt := t0.Add(time.Second + 10*time.Minute)
	if !r.Wake.Equal(fireAt) || len(r.Start) != 0 {
		t.Fatalf("sleep: wake %v start %+v", r.Wake, r.Start)
	}
	if rec := h.state.activity(addr, "cool"); rec.Status != record.StatusWaiting || rec.Timer.Kind != record.TimerSleep {
		t.Fatalf("sleep record = %+v", rec)
	}
	r = h.record(h.c.Stop(h.now))
	if !r.Done || r.Status != event.StatusInterrupted {
		t.Fatalf("stop while sleeping: done=%v %q", r.Done, r.Status)
	}

	// Restart five minutes later with the plan's modes.
	w.modes = map[string]Mode{"a": ModeSkip, "cool": ModeResume, "b": ModeFresh}
	h2 := newHarness(t, w, h.state, t0.Add(5*time.Minute))
	r = h2.start()
	if tr := eventsOf(r, event.TimerRecovered); len(tr) != 1 || !tr[0].FireAt.Equal(fireAt) {
		t.Fatalf("timer_recovered = %+v", tr)
	}
	if !r.Wake.Equal(fireAt) {
		t.Fatalf("wake %v, want %v", r.Wake, fireAt)
	}
	h2.now = fireAt
	r = h2.tick()
	if got := types(r); !slices.Equal(got, []event.Type{event.AttemptSucceeded, event.ActivitySucceeded, event.AttemptStarted}) {
		t.Fatalf("events = %v", got)
	}
	if len(r.Start) != 1 || r.Start[0].Activity != "b" {
		t.Fatalf("downstream not started: %+v", r.Start)
	}
	att := h2.state.attempts[attKey(addr, "cool", 1, 1)]
	if att.Outcome != record.OutcomeSucceeded || !att.Start.Equal(t0.Add(time.Second)) || !att.End.Equal(fireAt) {
		t.Fatalf("sleep attempt = %+v", att)
	}
	r = h2.finish("b", nil)
	if !r.Done || r.Status != event.StatusSucceeded {
		t.Fatalf("done=%v status=%q", r.Done, r.Status)
	}
	sum := eventsOf(r, event.RunCompleted)[0].Summary
	if sum.Unchanged != 1 || sum.Succeeded != 2 || sum.Activities != 3 {
		t.Fatalf("summary = %+v", sum)
	}
}

package core

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/wf-engine/wf/executor/event"
	"github.com/wf-engine/wf/retry"
	"github.com/wf-engine/wf/statefile/record"
)

// crashed builds a state in which activity "a" (generation 1) was running
// attempt n when the engine died, after the given counted failures of
// rule 0, with downstream activity "b" pending.
func crashed(n int, counted []int, firstStart time.Time) *memState {
	st := newMemState()
	st.insts[addr] = &record.Instance{Workflow: "order", Key: "k1", Created: t0.Add(-time.Hour), Updated: firstStart}
	st.acts[addr] = map[string]*record.Activity{
		"a": {Workflow: "order", Instance: "k1", Name: "a", Generation: 1, IdempotencyKey: "wf2-a1",
			Status: record.StatusRunning, Attempts: n, RuleCounts: counted, FirstStart: firstStart},
		"b": {Workflow: "order", Instance: "k1", Name: "b", Generation: 1, IdempotencyKey: "wf2-b1", Status: record.StatusPending},
	}
	return st
}

func withRules(rules ...retry.Rule) []retry.Rule { return rules }

func onRule(on []string, p retry.Policy) retry.Rule { return retry.Rule{On: on, Policy: p} }

// TestInterruptedNeverEndsTheActivity: an attempt found running after a
// crash resumes at once, under the same key, with the next number, whatever
// the policy says about its error, and counts against none of its limits.
func TestInterruptedNeverEndsTheActivity(t *testing.T) {
	allow := expo(time.Second, 0)
	allow.Retryable = []string{"NotReady"}
	expired := expo(time.Second, 5)
	expired.Expiration = time.Minute
	budgeted := expo(time.Second, 5)
	budgeted.Budget = "api"
	wildcard := expo(time.Second, 5)
	wildcard.NonRetryable = []string{"*"}
	otherRuleOptOut := expo(time.Second, 5)
	otherRuleOptOut.NonRetryable = []string{"interrupted"}
	never := func(retry.Failure, int, time.Duration) (bool, error) { return false, nil }

	tests := []struct {
		name       string
		rules      []retry.Rule
		n          int   // the attempt that was running
		counted    []int // rule counts before the crash
		firstStart time.Duration
	}{
		{name: "no retry block (one attempt)", rules: nil, n: 1},
		{name: "second interruption of a single attempt", rules: nil, n: 2},
		{name: "retryable_errors allowlist", rules: withRules(retry.Rule{Policy: allow}), n: 1},
		{name: "no attempts left", rules: withRules(retry.Rule{Policy: expo(time.Second, 3)}), n: 3, counted: []int{2}},
		{name: "ordered rules matching nothing", rules: withRules(onRule([]string{"http:429"}, expo(time.Second, 9)), onRule([]string{"exit:*"}, expo(time.Second, 2))), n: 1},
		{name: "retry_if false", rules: withRules(retry.Rule{Policy: expo(time.Second, 5), RetryIf: never}), n: 2, counted: []int{1}},
		{name: "expiration passed", rules: withRules(retry.Rule{Policy: expired}), n: 2, counted: []int{1}, firstStart: -time.Hour},
		{name: "budget exhausted", rules: withRules(retry.Rule{Policy: budgeted}), n: 2, counted: []int{1}},
		{name: "wildcard non_retryable_errors does not opt out", rules: withRules(retry.Rule{Policy: wildcard}), n: 1},
		{name: "opt-out in a rule that does not match interrupted", rules: withRules(onRule([]string{"http:429"}, otherRuleOptOut), retry.Rule{Policy: expo(time.Second, 2)}), n: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := &world{
				wf:      workflow(execAct("a", tt.rules), execAct("b", nil, "a")),
				budgets: map[string]retry.Budget{"api": {Name: "api", MaxRetries: 0, Window: time.Minute, OnExhausted: "fail"}},
				modes:   map[string]Mode{"a": ModeResume, "b": ModeResume},
			}
			st := crashed(tt.n, slices.Clone(tt.counted), t0.Add(tt.firstStart))
			h := newHarness(t, w, st, t0)
			r := h.start()
			if af := eventsOf(r, event.ActivityFailed); len(af) != 0 {
				t.Fatalf("activity failed: %+v", af)
			}
			if len(r.Start) != 1 || r.Start[0].Activity != "a" || r.Start[0].Number != tt.n+1 || r.Start[0].IdempotencyKey != "wf2-a1" {
				t.Fatalf("start = %+v; want attempt %d of a at once, key wf2-a1", r.Start, tt.n+1)
			}
			rec := st.activity(addr, "a")
			if rec.Interrupted != 1 || !slices.Equal(rec.RuleCounts, tt.counted) || rec.Attempts != tt.n+1 || rec.Status != record.StatusRunning {
				t.Fatalf("record = %+v; want 1 interrupted, rule counts %v untouched", rec, tt.counted)
			}
			att := st.attempts[attKey(addr, "a", 1, tt.n)]
			if att.Outcome != record.OutcomeInterrupted || att.Error.Type != "interrupted" || !att.HasWait || att.Wait != 0 || att.WaitSource != event.SourceInterrupted {
				t.Fatalf("interrupted attempt record = %+v", att)
			}
			if b := st.budgets["api"]; b != nil && len(b.Stamps) != 0 {
				t.Fatalf("an interrupted attempt took a budget token: %v", b.Stamps)
			}
			// The resumed attempt succeeds and downstream runs.
			h.at(time.Second)
			r = h.finish("a", nil)
			if len(r.Start) != 1 || r.Start[0].Activity != "b" {
				t.Fatalf("downstream did not start: %+v", r.Start)
			}
			r = h.finish("b", nil)
			if !r.Done || r.Status != event.StatusSucceeded {
				t.Fatalf("done=%v status=%q", r.Done, r.Status)
			}
		})
	}
}

// TestInterruptedCountsAgainstNoLimit: with maximum_attempts = 3 and two
// interruptions, the activity still gets three counted attempts, the
// views show attempt k/N with N raised by the interruptions, and retry_if
// sees the counted attempt number.
func TestInterruptedCountsAgainstNoLimit(t *testing.T) {
	var seen []int
	rule := retry.Rule{Policy: expo(time.Second, 3), RetryIf: func(_ retry.Failure, attempt int, _ time.Duration) (bool, error) {
		seen = append(seen, attempt)
		return true, nil
	}}
	w := &world{wf: workflow(execAct("a", []retry.Rule{rule}))}
	h := newHarness(t, w, nil, t0)
	h.start()
	h.at(time.Second)
	h.interrupt("a") // attempt 1
	r := h.finish("a", fail("exit:1"))
	if rs := eventsOf(r, event.RetryScheduled); len(rs) != 1 || rs[0].Attempt != 3 || *rs[0].DelayMs != 1000 {
		t.Fatalf("after the first counted failure: %+v; want retry 3 in 1s (the first wait)", rs)
	}
	h.at(2 * time.Second)
	r = h.tick()
	if st := eventsOf(r, event.AttemptStarted); len(st) != 1 || st[0].Attempt != 3 || st[0].MaxAttempts != 3 || st[0].Interrupted != 1 {
		t.Fatalf("attempt_started = %+v; want attempt 3, limit 3, 1 interrupted (carried apart from the limit)", st)
	}
	h.interrupt("a") // attempt 3
	r = h.finish("a", fail("exit:1"))
	if len(eventsOf(r, event.RetryScheduled)) != 1 {
		t.Fatalf("after the second counted failure: %v", types(r))
	}
	h.at(5 * time.Second)
	r = h.tick()
	if st := eventsOf(r, event.AttemptStarted); len(st) != 1 || st[0].Attempt != 5 || st[0].MaxAttempts != 3 || st[0].Interrupted != 2 {
		t.Fatalf("attempt_started = %+v; want attempt 5, limit 3, 2 interrupted", st)
	}
	r = h.finish("a", fail("exit:1"))
	af := eventsOf(r, event.ActivityFailed)
	if len(af) != 1 || af[0].Reason != event.ReasonMaxAttempts || af[0].Attempt != 5 {
		t.Fatalf("activity_failed = %+v; want max_attempts after the third counted failure (attempt 5)", af)
	}
	if !slices.Equal(seen, []int{1, 2}) {
		t.Fatalf("retry_if saw attempts %v; want the counted numbers 1, 2", seen)
	}
	if rec := h.state.activity(addr, "a"); rec.Interrupted != 2 || !slices.Equal(rec.RuleCounts, []int{3}) {
		t.Fatalf("record = %+v", rec)
	}
}

// TestInterruptedInRun: an attempt cancelled by the engine while the run
// goes on (a failed spawn record, say) starts its next attempt in the same
// step; once stopped, the next attempt is a durable zero-delay timer that
// the next run fires at once.
func TestInterruptedInRun(t *testing.T) {
	w := &world{wf: workflow(execAct("a", nil), execAct("b", nil, "a"))}
	h := newHarness(t, w, nil, t0)
	h.start()
	h.at(time.Second)
	r := h.interrupt("a")
	if len(r.Start) != 1 || r.Start[0].Number != 2 || eventsOf(r, event.ActivityFailed) != nil {
		t.Fatalf("in-run interruption: start %+v, events %v", r.Start, types(r))
	}
	key := r.Start[0].IdempotencyKey
	h.record(h.c.Stop(h.now))
	r = h.interrupt("a") // a second Ctrl-C cancels attempt 2
	if !r.Done || r.Status != event.StatusInterrupted || len(r.Start) != 0 {
		t.Fatalf("after the second interruption: done=%v status=%q start=%+v", r.Done, r.Status, r.Start)
	}
	rec := h.state.activity(addr, "a")
	if rec.Status != record.StatusWaiting || rec.Timer == nil || rec.Timer.Attempt != 3 || !rec.Timer.FireAt.Equal(h.now) || rec.Timer.Source != event.SourceInterrupted {
		t.Fatalf("state after the stop = %+v; want a due timer for attempt 3", rec)
	}

	w.modes = map[string]Mode{"a": ModeResume, "b": ModeResume}
	h2 := newHarness(t, w, h.state, t0.Add(time.Minute))
	r = h2.start()
	if len(r.Start) != 1 || r.Start[0].Number != 3 || r.Start[0].IdempotencyKey != key {
		t.Fatalf("next run: start %+v; want attempt 3 under key %s", r.Start, key)
	}
	// max_attempts is the rule's limit; the two interrupted attempts are
	// carried apart, so views never show attempt 3 of 1 as a breach.
	if st := eventsOf(r, event.AttemptStarted); st[0].MaxAttempts != 1 || st[0].Interrupted != 2 {
		t.Fatalf("attempt 3 shows max %d, interrupted %d; want 1 and 2", st[0].MaxAttempts, st[0].Interrupted)
	}
	if plan := eventsOf(r, event.Plan)[0]; plan.Activities[0].MaxAttempts != 1 {
		t.Fatalf("plan max attempts = %d; want 1", plan.Activities[0].MaxAttempts)
	}
}

// TestInterruptedOptOut: non_retryable_errors = ["interrupted"] in the rule
// that decides the error fails the activity with reason interrupted, on
// recovery and in a run; downstream is skipped.
func TestInterruptedOptOut(t *testing.T) {
	optOut := expo(time.Second, 5)
	optOut.NonRetryable = []string{"CardDeclined", "interrupted"}
	tests := []struct {
		name  string
		rules []retry.Rule
	}{
		{"single rule", []retry.Rule{{Policy: optOut}}},
		{"rule on interrupted", []retry.Rule{onRule([]string{"http:*"}, expo(time.Second, 5)), onRule([]string{"interrupted"}, optOut)}},
	}
	for _, tt := range tests {
		t.Run(tt.name+"/recovery", func(t *testing.T) {
			w := &world{wf: workflow(execAct("a", tt.rules), execAct("b", nil, "a")), modes: map[string]Mode{"a": ModeResume, "b": ModeResume}}
			st := crashed(1, nil, t0.Add(-time.Second))
			h := newHarness(t, w, st, t0)
			r := h.start()
			checkOptOutFailure(t, r, st)
		})
		t.Run(tt.name+"/in run", func(t *testing.T) {
			w := &world{wf: workflow(execAct("a", tt.rules), execAct("b", nil, "a"))}
			h := newHarness(t, w, nil, t0)
			h.start()
			h.record(h.c.Stop(h.now))
			r := h.interrupt("a")
			checkOptOutFailure(t, r, h.state)
		})
	}
}

func checkOptOutFailure(t *testing.T, r Ready, st *memState) {
	t.Helper()
	af := eventsOf(r, event.ActivityFailed)
	if len(af) != 1 || af[0].Reason != event.ReasonInterrupted || af[0].Error.Type != "interrupted" || !strings.Contains(af[0].Error.Message, "non_retryable_errors") {
		t.Fatalf("activity_failed = %+v; want reason interrupted", af)
	}
	if len(r.Start) != 0 {
		t.Fatalf("started %+v after the opt-out", r.Start)
	}
	if rec := st.activity(addr, "a"); rec.Status != record.StatusFailed || rec.FailReason != event.ReasonInterrupted {
		t.Fatalf("record = %+v", rec)
	}
	if rec := st.activity(addr, "b"); rec.Status != record.StatusSkipped {
		t.Fatalf("downstream record = %+v; want skipped", rec)
	}
	if !r.Done || r.Status == event.StatusSucceeded {
		t.Fatalf("done=%v status=%q", r.Done, r.Status)
	}
}

// TestActivityReportedInterruptedIsAnOrdinaryFailure: an activity that
// writes {"type": "interrupted"} to its error file was not cut short by
// the engine; its policy decides.
func TestActivityReportedInterruptedIsAnOrdinaryFailure(t *testing.T) {
	w := &world{wf: workflow(execAct("a", nil))}
	h := newHarness(t, w, nil, t0)
	h.start()
	r := h.finish("a", fail("interrupted"))
	if af := eventsOf(r, event.ActivityFailed); len(af) != 1 || af[0].Reason != event.ReasonMaxAttempts {
		t.Fatalf("activity_failed = %+v; want max_attempts", af)
	}
	if att := h.state.attempts[attKey(addr, "a", 1, 1)]; att.Outcome != record.OutcomeFailed {
		t.Fatalf("outcome %q; want failed", att.Outcome)
	}
}

// TestOrphans: what the shell did about a previous run's processes shows
// as events; survivors hold the activity (and downstream) without
// recording anything about it, so the next apply tries again.
func TestOrphans(t *testing.T) {
	t.Run("ended", func(t *testing.T) {
		w := &world{wf: workflow(execAct("a", nil), execAct("b", nil, "a")), modes: map[string]Mode{"a": ModeResume, "b": ModeResume}}
		st := crashed(3, nil, t0.Add(-time.Minute))
		h := newHarness(t, w, st, t0)
		h.opts.Orphans = map[string]map[string]Orphan{addr: {"a": {Number: 3, ProcessGroup: 4711, Killed: []int{4711, 4712}}}}
		h.c = New(h.opts)
		r := h.start()
		if got := types(r); !slices.Equal(got, []event.Type{event.Plan, event.OrphanEnded, event.AttemptFailed, event.RetryScheduled, event.AttemptStarted}) {
			t.Fatalf("events = %v", got)
		}
		oe := eventsOf(r, event.OrphanEnded)[0]
		if oe.Attempt != 3 || oe.ProcessGroup != 4711 || !slices.Equal(oe.PIDs, []int{4711, 4712}) {
			t.Fatalf("orphan_ended = %+v", oe)
		}
		if len(r.Start) != 1 || r.Start[0].Number != 4 {
			t.Fatalf("start = %+v", r.Start)
		}
	})
	t.Run("survivors", func(t *testing.T) {
		w := &world{wf: workflow(execAct("a", nil), execAct("b", nil, "a"), execAct("c", nil)), modes: map[string]Mode{"a": ModeResume, "b": ModeResume}}
		st := crashed(2, nil, t0.Add(-time.Minute))
		before := *st.activity(addr, "a")
		h := newHarness(t, w, st, t0)
		h.opts.Orphans = map[string]map[string]Orphan{addr: {"a": {Number: 2, ProcessGroup: 4711, Survivors: []int{4713}}}}
		h.c = New(h.opts)
		r := h.start()
		oa := eventsOf(r, event.OrphanAlive)
		if len(oa) != 1 || !slices.Equal(oa[0].PIDs, []int{4713}) || !strings.Contains(oa[0].Error.Message, "PID 4713") {
			t.Fatalf("orphan_alive = %+v", oa)
		}
		if len(r.Start) != 1 || r.Start[0].Activity != "c" {
			t.Fatalf("start = %+v; want only the unrelated activity c", r.Start)
		}
		for _, m := range r.Persist {
			if m.Activity != nil && m.Activity.Name != "c" || m.Attempt != nil && m.Attempt.Activity != "c" {
				t.Fatalf("recorded %+v about a held activity", m)
			}
		}
		r = h.finish("c", nil)
		if !r.Done || r.Status != event.StatusFailed {
			t.Fatalf("done=%v status=%q; want failed (a is held)", r.Done, r.Status)
		}
		if sum := eventsOf(r, event.RunCompleted)[0].Summary; sum.Pending != 2 || sum.Succeeded != 1 || sum.Skipped != 0 {
			t.Fatalf("summary = %+v; want a and b pending", sum)
		}
		if rec := st.activity(addr, "a"); rec.Status != before.Status || rec.Attempts != before.Attempts || rec.Interrupted != 0 {
			t.Fatalf("held record changed: %+v", rec)
		}
	})
}

// TestStaleRunningAttemptClosedOnRerun: when an activity found running
// starts a new generation instead (its definition changed), the old
// attempt is recorded interrupted rather than left running in the log.
func TestStaleRunningAttemptClosedOnRerun(t *testing.T) {
	w := &world{wf: workflow(execAct("a", nil)), modes: map[string]Mode{"a": ModeFresh}}
	st := crashed(1, nil, t0.Add(-time.Minute))
	h := newHarness(t, w, st, t0)
	h.opts.Running = map[string]map[string]*record.Attempt{addr: {"a": {
		Workflow: "order", Instance: "k1", Activity: "a", Generation: 1, Number: 1, IdempotencyKey: "wf2-a1",
		Start: t0.Add(-time.Minute), Outcome: record.OutcomeRunning,
	}}}
	h.c = New(h.opts)
	r := h.start()
	if len(r.Start) != 1 || r.Start[0].Number != 1 || r.Start[0].IdempotencyKey == "wf2-a1" {
		t.Fatalf("start = %+v; want attempt 1 of a new generation", r.Start)
	}
	if att := st.attempts[attKey(addr, "a", 1, 1)]; att.Outcome != record.OutcomeInterrupted || !att.End.Equal(t0) {
		t.Fatalf("old attempt = %+v; want interrupted", att)
	}
}

// TestKeysFromStateIdentity: a new generation's key comes from the state's
// identity and the instance's creation time; the stored key of a running
// generation is kept.
func TestKeysFromStateIdentity(t *testing.T) {
	keyOf := func(stateID string, created time.Time) string {
		w := &world{wf: workflow(execAct("a", nil))}
		st := newMemState()
		if !created.IsZero() {
			st.insts[addr] = &record.Instance{Workflow: "order", Key: "k1", Created: created}
		}
		h := newHarness(t, w, st, t0)
		h.opts.StateID = stateID
		h.c = New(h.opts)
		r := h.start()
		return r.Start[0].IdempotencyKey
	}
	a := keyOf("aaaa", t0.Add(-time.Hour))
	if again := keyOf("aaaa", t0.Add(-time.Hour)); again != a {
		t.Fatalf("same state, same instance: %s then %s", a, again)
	}
	if b := keyOf("bbbb", t0.Add(-time.Hour)); b == a {
		t.Fatal("two states with the same names share a key")
	}
	if c := keyOf("aaaa", t0.Add(-time.Minute)); c == a {
		t.Fatal("a recreated instance (wf state rm) reuses a key")
	}
	if d := keyOf("aaaa", time.Time{}); d != IdempotencyKey(KeyInput{StateID: "aaaa", Workflow: "order", Instance: "k1", Activity: "a", InstanceCreated: t0, Generation: 1}) {
		t.Fatal("a new instance's key is not derived from its creation now")
	}
}

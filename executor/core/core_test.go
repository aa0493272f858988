package core

import (
	"crypto/sha256"
	"encoding/hex"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wf-engine/wf/config"
	"github.com/wf-engine/wf/executor/event"
	"github.com/wf-engine/wf/retry"
	"github.com/wf-engine/wf/statefile/record"
)

func TestIdempotencyKey(t *testing.T) {
	in := KeyInput{StateID: "5f3c", Workflow: "order", Instance: "k1", Activity: "charge", InstanceCreated: t0, Generation: 1}
	base := IdempotencyKey(in)
	if !strings.HasPrefix(base, "wf2-") || len(base) != 36 {
		t.Fatalf("key %q: want wf2- and 32 hex digits", base)
	}
	if again := IdempotencyKey(in); again != base {
		t.Fatalf("not stable: %q vs %q", again, base)
	}
	tests := []struct {
		name   string
		change func(*KeyInput)
	}{
		{"other state", func(k *KeyInput) { k.StateID = "5f3d" }},
		{"other workflow", func(k *KeyInput) { k.Workflow = "orders" }},
		{"other key", func(k *KeyInput) { k.Instance = "k2" }},
		{"other activity", func(k *KeyInput) { k.Activity = "charge2" }},
		{"next generation", func(k *KeyInput) { k.Generation = 2 }},
		{"instance recreated", func(k *KeyInput) { k.InstanceCreated = t0.Add(time.Nanosecond) }},
		{"fields do not run together", func(k *KeyInput) { k.Workflow, k.Instance = "order"+"k1", "" }},
		{"length prefix is not ambiguous", func(k *KeyInput) { k.StateID, k.Workflow = "5f3c;5:order", "" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k := in
			tt.change(&k)
			if got := IdempotencyKey(k); got == base {
				t.Errorf("key collides with the base key")
			}
		})
	}
}

// TestIdempotencyKeyValues pins keys computed by the first
// implementation (a hash written to part by part): keys are stored in
// every activity record and sent to servers, so an implementation that
// computes them differently must not change a single one.
func TestIdempotencyKeyValues(t *testing.T) {
	tests := []struct {
		in   KeyInput
		want string
	}{
		{KeyInput{StateID: "5f3c", Workflow: "order", Instance: "k1", Activity: "charge", InstanceCreated: time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC), Generation: 1}, "wf2-ea8b04cb2815d6ff65404645bb5e0a62"},
		{KeyInput{}, "wf2-bdb8a1310b6660d4e3c1a71f2b806d16"},
		// A negative UnixNano, a multi-byte name.
		{KeyInput{StateID: "0123456789abcdef0123456789abcdef", Workflow: "w", Instance: "a/b", Activity: `fetch["é"]`, InstanceCreated: time.Date(1969, 12, 31, 23, 0, 0, 1, time.UTC), Generation: 12345}, "wf2-82559a46c1b9e0a0a28811da4d783697"},
	}
	for _, tt := range tests {
		if got := IdempotencyKey(tt.in); got != tt.want {
			t.Errorf("IdempotencyKey(%+v) = %q, want %q", tt.in, got, tt.want)
		}
		if got := keyByParts(tt.in); got != tt.want {
			t.Errorf("keyByParts(%+v) = %q, want %q", tt.in, got, tt.want)
		}
	}
	// Inputs longer than the buffer the parts are written to.
	long := KeyInput{StateID: strings.Repeat("s", 100), Workflow: strings.Repeat("w", 100), Instance: "k", Activity: strings.Repeat("a", 300), InstanceCreated: t0, Generation: 7}
	if got, want := IdempotencyKey(long), keyByParts(long); got != want {
		t.Errorf("long input: %q, want %q", got, want)
	}
}

// keyByParts is the first implementation of IdempotencyKey.
func keyByParts(in KeyInput) string {
	h := sha256.New()
	for _, part := range []string{
		in.StateID, in.Workflow, in.Instance, in.Activity,
		strconv.FormatInt(in.InstanceCreated.UnixNano(), 10),
		strconv.Itoa(in.Generation),
	} {
		h.Write([]byte(strconv.Itoa(len(part)) + ":" + part + ";"))
	}
	return "wf2-" + hex.EncodeToString(h.Sum(nil))[:32]
}

// TestBackoffTimers: an exponential policy arms durable timers at 1s, 2s,
// 4s and gives up after the fourth attempt; nothing starts before its time.
func TestBackoffTimers(t *testing.T) {
	w := &world{wf: workflow(execAct("charge", []retry.Rule{{Policy: expo(time.Second, 4)}}))}
	h := newHarness(t, w, nil, t0)
	r := h.start()
	if got := types(r); !slices.Equal(got, []event.Type{event.Plan, event.AttemptStarted}) {
		t.Fatalf("start events = %v", got)
	}
	if len(r.Start) != 1 || r.Start[0].Number != 1 || r.Start[0].Timeout != 30*time.Second {
		t.Fatalf("start = %+v", r.Start)
	}
	elapsed := time.Duration(0)
	for i, want := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second} {
		elapsed += 100 * time.Millisecond
		h.at(elapsed)
		r = h.finish("charge", fail("exit:1"))
		rs := eventsOf(r, event.RetryScheduled)
		if len(rs) != 1 || *rs[0].DelayMs != want.Milliseconds() || rs[0].Attempt != i+2 || rs[0].DelaySource != "policy" {
			t.Fatalf("failure %d: retry_scheduled = %+v", i+1, rs)
		}
		if !r.Wake.Equal(h.now.Add(want)) {
			t.Fatalf("failure %d: wake %v, want %v", i+1, r.Wake, h.now.Add(want))
		}
		// The failure and its timer are in the same batch.
		var sawTimer, sawAttempt bool
		for _, m := range r.Persist {
			if m.Activity != nil && m.Activity.Timer != nil && m.Activity.Timer.FireAt.Equal(r.Wake) && m.Activity.Status == record.StatusWaiting {
				sawTimer = true
			}
			if m.Attempt != nil && m.Attempt.Number == i+1 && m.Attempt.Outcome == record.OutcomeFailed && m.Attempt.HasWait && m.Attempt.Wait == want {
				sawAttempt = true
			}
		}
		if !sawTimer || !sawAttempt {
			t.Fatalf("failure %d: persist lacks timer (%v) or failed attempt (%v): %+v", i+1, sawTimer, sawAttempt, r.Persist)
		}
		wake := r.Wake
		h.now = wake.Add(-time.Millisecond)
		if r = h.tick(); len(r.Start) != 0 {
			t.Fatalf("attempt started %v early", time.Millisecond)
		}
		h.now = wake
		r = h.tick()
		if len(r.Start) != 1 || r.Start[0].Number != i+2 {
			t.Fatalf("tick at wake: start = %+v", r.Start)
		}
		elapsed = h.now.Sub(t0)
	}
	h.now = h.now.Add(time.Second)
	r = h.finish("charge", fail("exit:1"))
	af := eventsOf(r, event.ActivityFailed)
	if len(af) != 1 || af[0].Reason != event.ReasonMaxAttempts || af[0].Error.Type != "exit:1" {
		t.Fatalf("activity_failed = %+v", af)
	}
	if !r.Done || r.Status != event.StatusFailed {
		t.Fatalf("done=%v status=%q", r.Done, r.Status)
	}
	rc := eventsOf(r, event.RunCompleted)
	if len(rc) != 1 || rc[0].Summary.Attempts != 4 || rc[0].Summary.Retries != 3 || rc[0].Summary.Failed != 1 {
		t.Fatalf("run_completed = %+v", rc)
	}
	rec := h.state.activity(addr, "charge")
	if rec.Status != record.StatusFailed || rec.FailReason != "max_attempts" || rec.Timer != nil || rec.Attempts != 4 {
		t.Fatalf("final record = %+v", rec)
	}
}

// TestDecisions covers the reasons a failure is not retried, and ordered
// rules counting their own failures.
func TestDecisions(t *testing.T) {
	exp := expo(10*time.Second, 0)
	exp.Expiration = 15 * time.Second
	nonRetry := expo(time.Second, 5)
	nonRetry.NonRetryable = []string{"CardDeclined"}
	rules := []retry.Rule{
		{On: []string{"http:429"}, Policy: retry.Policy{Backoff: retry.Fixed, InitialInterval: 5 * time.Second, MaximumInterval: 5 * time.Second, MaximumAttempts: 20}},
		{Policy: expo(time.Second, 3)},
	}
	type failure struct {
		at  time.Duration
		f   *retry.Failure
		dly time.Duration // 0: not retried
	}
	tests := []struct {
		name     string
		rules    []retry.Rule
		failures []failure
		reason   string
	}{
		{"no retry block: one attempt", nil, []failure{{time.Second, fail("exit:1"), 0}}, "max_attempts"},
		{"expiration", []retry.Rule{{Policy: exp}}, []failure{
			{time.Second, fail("exit:1"), 10 * time.Second},
			{12 * time.Second, fail("exit:1"), 0},
		}, "expired"},
		{"non-retryable pattern", []retry.Rule{{Policy: nonRetry}}, []failure{
			{time.Second, fail("http:503"), time.Second},
			{3 * time.Second, fail("CardDeclined"), 0},
		}, "non_retryable"},
		{"flagged by the activity", []retry.Rule{{Policy: nonRetry}}, []failure{
			{time.Second, &retry.Failure{Type: "Fraud", NonRetryable: true}, 0},
		}, "non_retryable"},
		{"ordered rules count separately", rules, []failure{
			{time.Second, fail("http:503"), time.Second},
			{3 * time.Second, fail("http:429"), 5 * time.Second},
			{9 * time.Second, fail("http:503"), 2 * time.Second},
			{12 * time.Second, fail("http:429"), 5 * time.Second},
			{18 * time.Second, fail("http:503"), 0},
		}, "max_attempts"},
		{"server delay honoured", []retry.Rule{{Policy: expo(time.Second, 3)}}, []failure{
			{time.Second, &retry.Failure{Type: "http:503", RetryAfter: 7 * time.Second, HasRetryAfter: true}, 7 * time.Second},
			{9 * time.Second, fail("http:503"), 2 * time.Second},
			{12 * time.Second, fail("http:503"), 0},
		}, "max_attempts"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, &world{wf: workflow(execAct("a", tt.rules))}, nil, t0)
			h.start()
			for i, f := range tt.failures {
				h.at(f.at)
				if len(h.starts) == 0 {
					r := h.tick()
					if len(r.Start) != 1 {
						t.Fatalf("failure %d: no attempt due at %v", i+1, f.at)
					}
				}
				r := h.finish("a", f.f)
				rs := eventsOf(r, event.RetryScheduled)
				if f.dly == 0 {
					if len(rs) != 0 {
						t.Fatalf("failure %d retried: %+v", i+1, rs)
					}
					af := eventsOf(r, event.ActivityFailed)
					if len(af) != 1 || af[0].Reason != tt.reason {
						t.Fatalf("failure %d: activity_failed = %+v, want reason %s", i+1, af, tt.reason)
					}
					if !r.Done {
						t.Fatal("run not done after the only activity failed")
					}
					continue
				}
				if len(rs) != 1 || *rs[0].DelayMs != f.dly.Milliseconds() {
					t.Fatalf("failure %d: retry_scheduled = %+v, want delay %v", i+1, rs, f.dly)
				}
				if f.f.HasRetryAfter && rs[0].DelaySource != "server" {
					t.Fatalf("delay source %q, want server", rs[0].DelaySource)
				}
			}
		})
	}
}

func budgetRule(budget string) []retry.Rule {
	p := expo(time.Second, 5)
	p.Budget = budget
	return []retry.Rule{{Policy: p}}
}

func TestBudgetFail(t *testing.T) {
	w := &world{
		wf:      workflow(execAct("a", budgetRule("api")), execAct("b", budgetRule("api"))),
		budgets: map[string]retry.Budget{"api": {Name: "api", MaxRetries: 1, Window: time.Minute, OnExhausted: "fail"}},
	}
	h := newHarness(t, w, nil, t0)
	h.start()
	h.at(time.Second)
	r := h.record(h.c.AttemptsDone(h.now, []Result{h.result("a", fail("http:503")), h.result("b", fail("http:503"))}))
	rs := eventsOf(r, event.RetryScheduled)
	if len(rs) != 1 || rs[0].Activity != "activity.a" || rs[0].Budget == nil || rs[0].Budget.Used != 1 || rs[0].Budget.MaxRetries != 1 {
		t.Fatalf("retry_scheduled = %+v", rs)
	}
	af := eventsOf(r, event.ActivityFailed)
	if len(af) != 1 || af[0].Activity != "activity.b" || af[0].Reason != event.ReasonBudgetExhausted || af[0].Error.Type != "budget_exhausted" {
		t.Fatalf("activity_failed = %+v", af)
	}
	if b := h.state.budgets["api"]; b == nil || len(b.Stamps) != 1 || !b.Stamps[0].Equal(h.now) {
		t.Fatalf("budget record = %+v", b)
	}
}

func TestBudgetWait(t *testing.T) {
	w := &world{
		wf:      workflow(execAct("a", budgetRule("api")), execAct("b", budgetRule("api"))),
		budgets: map[string]retry.Budget{"api": {Name: "api", MaxRetries: 1, Window: 10 * time.Second, OnExhausted: "wait"}},
	}
	h := newHarness(t, w, nil, t0)
	h.start()
	h.at(time.Second)
	r := h.finish("a", fail("http:503"))
	if rs := eventsOf(r, event.RetryScheduled); len(rs) != 1 {
		t.Fatalf("a: retry_scheduled = %+v", rs)
	}
	r = h.finish("b", fail("http:503"))
	bw := eventsOf(r, event.BudgetWait)
	free := t0.Add(11 * time.Second)
	if len(bw) != 1 || !bw[0].FireAt.Equal(free) || bw[0].Attempt != 2 || bw[0].Budget == nil || bw[0].Budget.Used != 1 {
		t.Fatalf("budget_wait = %+v", bw)
	}
	if rec := h.state.activity(addr, "b"); rec.Timer == nil || rec.Timer.Kind != record.TimerBudget || !rec.Timer.FireAt.Equal(free) {
		t.Fatalf("b's timer = %+v", rec.Timer)
	}
	// a's retry fires at 2s and succeeds; the budget stays full for b.
	h.at(2 * time.Second)
	if r = h.tick(); len(r.Start) != 1 || r.Start[0].Activity != "a" {
		t.Fatalf("a not retried: %+v", r.Start)
	}
	h.finish("a", nil)
	if !r.Wake.Equal(free) {
		t.Fatalf("wake %v, want b's budget timer %v", r.Wake, free)
	}
	h.now = free
	r = h.tick()
	if len(r.Start) != 1 || r.Start[0].Activity != "b" || r.Start[0].Number != 2 {
		t.Fatalf("b not retried once the budget freed: %+v", r.Start)
	}
	for _, e := range r.Events {
		if e.Activity == "activity.b" && e.Budget == nil {
			t.Errorf("event %s about a budgeted activity lacks budget usage", e.Type)
		}
	}
	if b := h.state.budgets["api"]; len(b.Stamps) != 1 || !b.Stamps[0].Equal(free) {
		t.Fatalf("budget not pruned and stamped: %+v", b.Stamps)
	}
}

func TestSkipCascade(t *testing.T) {
	w := &world{
		wf:   workflow(execAct("a", nil), execAct("b", nil, "a"), execAct("c", nil, "b"), execAct("d", nil), execAct("e", nil, "d", "c")),
		seen: map[string][]string{},
	}
	h := newHarness(t, w, nil, t0)
	r := h.start()
	if len(r.Start) != 2 {
		t.Fatalf("start = %+v", r.Start)
	}
	r = h.finish("a", fail("exit:2"))
	var skipped []string
	for _, e := range eventsOf(r, event.ActivitySkipped) {
		if e.Reason != event.ReasonUpstreamFailed {
			t.Errorf("skip reason %q", e.Reason)
		}
		skipped = append(skipped, e.Activity)
	}
	if !slices.Equal(skipped, []string{"activity.b", "activity.c", "activity.e"}) {
		t.Fatalf("skipped = %v", skipped)
	}
	if r.Done {
		t.Fatal("done while d runs")
	}
	r = h.finish("d", nil)
	if !r.Done || r.Status != event.StatusFailed {
		t.Fatalf("done=%v status=%q", r.Done, r.Status)
	}
	sum := eventsOf(r, event.RunCompleted)[0].Summary
	if sum.Failed != 1 || sum.Skipped != 3 || sum.Succeeded != 1 {
		t.Fatalf("summary = %+v", sum)
	}
	if h.state.activity(addr, "e").Status != record.StatusSkipped {
		t.Fatal("e not recorded skipped")
	}
}

// An upstream named by depends_on alone passes no outputs: its value (for
// a fan-out, the decoded outputs of every element) is never computed.
func TestDependsOnAlonePassesNoOutputs(t *testing.T) {
	b := execAct("b", nil, "a", "x")
	b.ResolveDeps = []string{"x"}
	w := &world{wf: workflow(execAct("a", nil), execAct("x", nil), b), seen: map[string][]string{}}
	h := newHarness(t, w, nil, t0)
	h.start()
	h.finish("a", nil)
	h.finish("x", nil)
	if !slices.Equal(w.seen["b"], []string{"x"}) {
		t.Fatalf("b resolved with upstreams %v, want [x]", w.seen["b"])
	}
}

func TestUpstreamOutputsAndConfigFailure(t *testing.T) {
	w := &world{
		wf:      workflow(execAct("a", nil), execAct("b", []retry.Rule{{Policy: expo(time.Second, 5)}}, "a"), execAct("c", nil, "b")),
		seen:    map[string][]string{},
		badSpec: map[string]bool{"b": true},
	}
	h := newHarness(t, w, nil, t0)
	h.start()
	r := h.finish("a", nil)
	if !slices.Equal(w.seen["b"], []string{"a"}) {
		t.Fatalf("b resolved with upstreams %v", w.seen["b"])
	}
	if len(r.Start) != 0 {
		t.Fatalf("a config failure must not start an attempt: %+v", r.Start)
	}
	af := eventsOf(r, event.ActivityFailed)
	if len(af) != 1 || af[0].Error.Type != "config" || !af[0].Error.NonRetryable || !strings.Contains(af[0].Error.Message, "Invalid template: boom") {
		t.Fatalf("activity_failed = %+v", af)
	}
	if sk := eventsOf(r, event.ActivitySkipped); len(sk) != 1 || sk[0].Activity != "activity.c" {
		t.Fatalf("skipped = %+v", sk)
	}
}

func TestParallelism(t *testing.T) {
	w := &world{
		wf:     workflow(execAct("a", nil), execAct("b", nil), sleepAct("s1"), execAct("c", nil), sleepAct("s2"), execAct("d", nil)),
		sleeps: map[string]time.Duration{"s1": time.Hour, "s2": time.Hour},
		par:    2,
	}
	h := newHarness(t, w, nil, t0)
	r := h.start()
	var names []string
	for _, s := range r.Start {
		names = append(names, s.Activity)
	}
	if !slices.Equal(names, []string{"a", "b"}) {
		t.Fatalf("started %v, want [a b] (sleeps do not take slots)", names)
	}
	if n := len(eventsOf(r, event.AttemptStarted)); n != 4 {
		t.Fatalf("%d attempt_started, want 4 (2 exec + 2 sleeps)", n)
	}
	r = h.finish("b", nil)
	if len(r.Start) != 1 || r.Start[0].Activity != "c" {
		t.Fatalf("after b: %+v", r.Start)
	}
	r = h.record(h.c.AttemptsDone(h.now, []Result{h.result("a", nil), h.result("c", nil)}))
	if len(r.Start) != 1 || r.Start[0].Activity != "d" {
		t.Fatalf("after a and c: %+v", r.Start)
	}
}

func TestFireNow(t *testing.T) {
	w := &world{wf: workflow(execAct("a", []retry.Rule{{Policy: expo(time.Minute, 5)}}))}
	h := newHarness(t, w, nil, t0)
	h.start()
	h.at(time.Second)
	h.finish("a", fail("http:503"))
	h.at(5 * time.Second)
	if r := h.record(h.c.FireNow(h.now, addr, "activity.nope")); len(r.Start) != 0 || len(r.Events) != 0 {
		t.Fatalf("unknown activity fired: %+v", r)
	}
	r := h.record(h.c.FireNow(h.now, addr, "activity.a"))
	if got := types(r); !slices.Equal(got, []event.Type{event.RetryScheduled, event.AttemptStarted}) {
		t.Fatalf("events = %v", got)
	}
	rs := eventsOf(r, event.RetryScheduled)[0]
	if rs.DelaySource != "manual" || *rs.DelayMs != 0 || !rs.FireAt.Equal(h.now) || rs.Attempt != 2 {
		t.Fatalf("retry_scheduled = %+v", rs)
	}
	if len(r.Start) != 1 || r.Start[0].Number != 2 {
		t.Fatalf("start = %+v", r.Start)
	}
	if att := h.state.attempts[attKey(addr, "a", 1, 2)]; att == nil || att.FiredBy != "manual" {
		t.Fatalf("attempt 2 = %+v", att)
	}
	if !r.Wake.IsZero() {
		t.Fatalf("the old timer is still armed: wake %v", r.Wake)
	}
	// Not pending any more: a second FireNow does nothing.
	if r = h.record(h.c.FireNow(h.now, addr, "a")); len(r.Start) != 0 || len(r.Events) != 0 {
		t.Fatalf("fired a running activity: %+v", r)
	}
}

func TestStop(t *testing.T) {
	w := &world{
		wf:  workflow(execAct("a", []retry.Rule{{Policy: expo(time.Second, 5)}}), execAct("b", nil), execAct("c", nil), execAct("d", nil, "b")),
		par: 2,
	}
	h := newHarness(t, w, nil, t0)
	h.start()
	h.at(time.Second)
	r := h.record(h.c.Stop(h.now))
	if r.Done || len(r.Start) != 0 {
		t.Fatalf("stop with attempts running: %+v", r)
	}
	r = h.finish("b", nil)
	if len(r.Start) != 0 {
		t.Fatalf("started %+v after Stop", r.Start)
	}
	if r.Done {
		t.Fatal("done while a runs")
	}
	r = h.interrupt("a")
	if rs := eventsOf(r, event.RetryScheduled); len(rs) != 1 {
		t.Fatalf("interrupted attempt after Stop: retry_scheduled = %+v", rs)
	}
	if rec := h.state.activity(addr, "a"); rec.Timer == nil || rec.Status != record.StatusWaiting {
		t.Fatalf("retry timer not recorded: %+v", rec)
	}
	if att := h.state.attempts[attKey(addr, "a", 1, 1)]; att.Outcome != record.OutcomeInterrupted {
		t.Fatalf("attempt outcome %q", att.Outcome)
	}
	if !r.Done || r.Status != event.StatusInterrupted || !r.Wake.IsZero() {
		t.Fatalf("done=%v status=%q wake=%v", r.Done, r.Status, r.Wake)
	}
	sum := eventsOf(r, event.RunCompleted)[0].Summary
	if sum.Pending != 3 || sum.Succeeded != 1 {
		t.Fatalf("summary = %+v", sum)
	}
	if r = h.tick(); !r.Done || len(r.Events) != 0 {
		t.Fatalf("a finished core emitted %+v", r)
	}
}

func TestFreshAndResumeGenerations(t *testing.T) {
	st := newMemState()
	st.acts[addr] = map[string]*record.Activity{
		"a": {Workflow: "order", Instance: "k1", Name: "a", Generation: 3, IdempotencyKey: "old", Status: record.StatusFailed, Attempts: 4, RuleCounts: []int{3}, FailReason: "max_attempts"},
		"b": {Workflow: "order", Instance: "k1", Name: "b", Generation: 2, IdempotencyKey: "keep", Status: record.StatusPending},
	}
	w := &world{wf: workflow(execAct("a", nil), execAct("b", nil)), modes: map[string]Mode{"a": ModeFresh, "b": ModeResume}}
	h := newHarness(t, w, st, t0)
	r := h.start()
	plan := eventsOf(r, event.Plan)[0]
	if plan.Activities[0].Action != "retry_failed" || plan.Activities[1].Action != "resume" {
		t.Fatalf("plan = %+v", plan.Activities)
	}
	a := st.activity(addr, "a")
	if a.Generation != 4 || a.IdempotencyKey != IdempotencyKey(KeyInput{StateID: testStateID, Workflow: "order", Instance: "k1", Activity: "a", InstanceCreated: t0, Generation: 4}) || a.RuleCounts != nil || a.Attempts != 1 || a.FailReason != "" && a.Status != record.StatusRunning {
		t.Fatalf("fresh record = %+v", a)
	}
	if a.DefHash == "" || !a.FirstStart.Equal(t0) {
		t.Fatalf("fresh record lacks def hash or first start: %+v", a)
	}
	b := st.activity(addr, "b")
	if b.Generation != 2 || b.IdempotencyKey != "keep" || b.Attempts != 1 {
		t.Fatalf("resumed record = %+v", b)
	}
}

// TestDeterminism runs the same scenario twice with jitter and compares
// every Ready.
func TestDeterminism(t *testing.T) {
	run := func() []Ready {
		p := expo(time.Second, 6)
		p.Jitter = retry.Jitter{Mode: retry.JitterFull}
		acts := []*config.Activity{sleepAct("s")}
		for _, n := range []string{"a", "b", "c", "d"} {
			acts = append(acts, execAct(n, []retry.Rule{{Policy: p}}))
		}
		acts = append(acts, execAct("z", nil, "a", "b", "c", "d", "s"))
		w := &world{wf: workflow(acts...), sleeps: map[string]time.Duration{"s": 3 * time.Second}, par: 2, seed: 42}
		h := newHarness(t, w, nil, t0)
		h.start()
		for step := 1; step < 200; step++ {
			h.at(time.Duration(step) * 250 * time.Millisecond)
			var rs []Result
			for _, name := range sortedKeys(h.starts) {
				var f *retry.Failure
				if (step+len(name))%3 != 0 {
					f = fail("http:503")
				}
				rs = append(rs, h.result(name, f))
			}
			if len(rs) > 0 {
				h.record(h.c.AttemptsDone(h.now, rs))
			}
			if r := h.tick(); r.Done {
				break
			}
		}
		return h.steps
	}
	first, second := run(), run()
	if len(first) < 10 {
		t.Fatalf("scenario too short: %d steps", len(first))
	}
	if !reflect.DeepEqual(first, second) {
		for i := range first {
			if i >= len(second) || !reflect.DeepEqual(first[i], second[i]) {
				t.Fatalf("runs diverge at step %d", i)
			}
		}
		t.Fatal("runs differ in length")
	}
	if !first[len(first)-1].Done {
		t.Fatal("scenario did not finish")
	}
}

func withRunning(o Options, running map[string]map[string]*record.Attempt) Options {
	o.Running = running
	return o
}

package core

import (
	"encoding/json"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/wf-engine/wf/config"
	"github.com/wf-engine/wf/executor/event"
	"github.com/wf-engine/wf/retry"
	"github.com/wf-engine/wf/statefile/record"
)

// loadWF loads one workflow from HCL: for_each, trigger rules, when,
// outputs and moved blocks need the real configuration.
func loadWF(t *testing.T, src string) *config.Workflow {
	t.Helper()
	cfg, diags := config.LoadFiles("cfg", map[string][]byte{"main.wf.hcl": []byte(src)}, config.LoadOptions{})
	if diags.HasErrors() {
		t.Fatalf("load: %v", diags)
	}
	return cfg.Workflows[0]
}

// realHarness runs a core over a loaded workflow with its real Resolve.
func realHarness(t *testing.T, wf *config.Workflow, st *memState, modes map[string]Mode) *harness {
	t.Helper()
	if st == nil {
		st = newMemState()
	}
	opts := Options{
		Instances:     []Instance{{Workflow: wf, Modes: modes}},
		Rand:          rand.New(rand.NewPCG(1, 7)),
		Activities:    st.acts,
		BudgetState:   st.budgets,
		InstanceState: st.insts,
		StateID:       testStateID,
	}
	h := &harness{t: t, state: st, now: t0, starts: map[string]Attempt{}, wf: wf, opts: opts}
	h.c = New(opts)
	return h
}

// succeed reports name's running attempt as succeeded with outputs.
func (h *harness) succeed(name, outputs string) Ready {
	h.t.Helper()
	res := h.result(name, nil)
	res.Outputs = json.RawMessage(outputs)
	return h.record(h.c.AttemptsDone(h.now, []Result{res}))
}

func (h *harness) allEvents() []event.Event {
	var out []event.Event
	for _, r := range h.steps {
		out = append(out, r.Events...)
	}
	return out
}

func (h *harness) eventsOf(t event.Type) []event.Event {
	var out []event.Event
	for _, e := range h.allEvents() {
		if e.Type == t {
			out = append(out, e)
		}
	}
	return out
}

// sortedStarted lists the activities a step started, sorted.
func sortedStarted(r Ready) []string {
	var out []string
	for _, s := range r.Start {
		out = append(out, s.Activity)
	}
	slices.Sort(out)
	return out
}

const daddr = "w/default"

// TestForEachStatic: a for_each known before the run makes one activity
// per key, each with its own record and idempotency key (derived with its
// key); downstream waits for all of them and sees them as a map.
func TestForEachStatic(t *testing.T) {
	wf := loadWF(t, `workflow "w" {
  activity "fetch" {
    for_each = { a = "1", b = "2", c = "3" }
    exec { command = ["fetch", each.key, each.value] }
  }
  activity "report" {
    exec { command = concat(["report"], values(activity.fetch)[*].stdout, [activity.fetch["b"].stdout]) }
  }
}`)
	h := realHarness(t, wf, nil, nil)
	r := h.start()
	if got := sortedStarted(r); strings.Join(got, " ") != `fetch["a"] fetch["b"] fetch["c"]` {
		t.Fatalf("started %v", got)
	}
	plan := eventsOf(r, event.Plan)[0]
	if len(plan.Activities) != 4 || plan.Activities[0].Activity != `activity.fetch["a"]` || plan.Activities[0].Block != "activity.fetch" ||
		strings.Join(plan.Activities[3].DependsOn, ",") != "activity.fetch" {
		t.Errorf("plan activities %+v", plan.Activities)
	}
	keys := map[string]bool{}
	for _, s := range r.Start {
		keys[s.IdempotencyKey] = true
		if !slices.Equal(s.Spec.Exec.Command[1:], []string{s.Activity[7:8], map[string]string{"a": "1", "b": "2", "c": "3"}[s.Activity[7:8]]}) {
			t.Errorf("%s command %v", s.Activity, s.Spec.Exec.Command)
		}
	}
	if len(keys) != 3 {
		t.Errorf("elements share idempotency keys: %v", keys)
	}
	want := IdempotencyKey(KeyInput{StateID: testStateID, Workflow: "w", Instance: "default", Activity: `fetch["b"]`, InstanceCreated: t0, Generation: 1})
	if rec := h.state.activity(daddr, `fetch["b"]`); rec == nil || rec.IdempotencyKey != want {
		t.Errorf("element key %v, want %s", rec, want)
	}
	h.succeed(`fetch["a"]`, `{"stdout":"A"}`)
	r = h.succeed(`fetch["c"]`, `{"stdout":"C"}`)
	if len(r.Start) != 0 {
		t.Fatalf("report started before every element ended: %v", sortedStarted(r))
	}
	r = h.succeed(`fetch["b"]`, `{"stdout":"B"}`)
	if len(r.Start) != 1 || strings.Join(r.Start[0].Spec.Exec.Command, " ") != "report A B C B" {
		t.Fatalf("report: %+v", r.Start)
	}
	r = h.succeed("report", `{}`)
	done := eventsOf(r, event.RunCompleted)
	if len(done) != 1 || done[0].Status != event.StatusSucceeded || done[0].Summary.Activities != 4 || done[0].Summary.Succeeded != 4 {
		t.Errorf("run completed %+v", done)
	}
	if h.state.activity(daddr, "fetch") != nil {
		t.Error("the group's own record was stored")
	}
}

// TestForEachFromUpstream: a collection from an upstream result expands
// when that result is there; stored elements it no longer has are
// forgotten, and a pending retry of one is cancelled and said so.
func TestForEachFromUpstream(t *testing.T) {
	wf := loadWF(t, `workflow "w" {
  activity "list" {
    exec { command = ["list"] }
  }
  activity "fetch" {
    for_each = toset(activity.list.result)
    exec { command = ["fetch", each.key] }
    retry { maximum_attempts = 3 }
  }
}`)
	st := newMemState()
	st.acts[daddr] = map[string]*record.Activity{
		`fetch["old"]`: {Workflow: "w", Instance: "default", Name: `fetch["old"]`, Generation: 1, Status: record.StatusWaiting, Attempts: 1,
			Timer: &record.Timer{Kind: record.TimerRetry, FireAt: t0.Add(60e9), Attempt: 2, Set: t0}},
	}
	h := realHarness(t, wf, st, nil)
	r := h.start()
	plan := eventsOf(r, event.Plan)[0]
	if len(plan.Activities) != 2 || plan.Activities[1].Activity != "activity.fetch" || strings.Join(plan.Activities[1].KnownAfter, ",") != "activity.list" {
		t.Fatalf("plan %+v", plan.Activities)
	}
	if got := sortedStarted(r); strings.Join(got, ",") != "list" {
		t.Fatalf("started %v", got)
	}
	r = h.succeed("list", `{"result":["b","a","b"]}`)
	if got := sortedStarted(r); strings.Join(got, " ") != `fetch["a"] fetch["b"]` {
		t.Fatalf("after list: %v", got)
	}
	exp := eventsOf(r, event.ActivityExpanded)
	if len(exp) != 1 || exp[0].Activity != "activity.fetch" || len(exp[0].Activities) != 2 {
		t.Errorf("expanded %+v", exp)
	}
	rm := eventsOf(r, event.ActivityRemoved)
	if len(rm) != 1 || rm[0].Activity != `activity.fetch["old"]` || rm[0].Reason != ReasonNotInForEach || rm[0].Error == nil ||
		!strings.Contains(rm[0].Error.Message, "pending retry (attempt 2, due in 1m0s) was cancelled") {
		t.Errorf("removed %+v", rm)
	}
	if h.state.activity(daddr, `fetch["old"]`) != nil {
		t.Error("the stale element is still stored")
	}
	h.succeed(`fetch["a"]`, `{}`)
	r = h.finish(`fetch["b"]`, fail("exit:1"))
	r = h.tick()
	_ = r
	h.at(10e9)
	h.tick()
	h.finish(`fetch["b"]`, nil)
	done := h.eventsOf(event.RunCompleted)
	if len(done) != 1 || done[0].Status != event.StatusSucceeded || done[0].Summary.Activities != 3 {
		t.Errorf("done %+v", done)
	}

	// A list from upstream fails the activity with the hint, once.
	wf = loadWF(t, `workflow "w" {
  activity "list" {
    exec { command = ["list"] }
  }
  activity "fetch" {
    for_each = activity.list.result
    exec { command = ["fetch", each.key] }
  }
}`)
	h = realHarness(t, wf, nil, nil)
	h.start()
	r = h.succeed("list", `{"result":["a"]}`)
	failed := eventsOf(r, event.ActivityFailed)
	if len(failed) != 1 || failed[0].Activity != "activity.fetch" || !strings.Contains(failed[0].Error.Message, "toset(") {
		t.Errorf("failed %+v", failed)
	}
	if done := eventsOf(r, event.RunCompleted); len(done) != 1 || done[0].Status != event.StatusFailed {
		t.Errorf("done %+v", done)
	}
}

// TestTriggerRules: compensation runs when shipping fails for good, a
// cleanup runs however it ended, the normal path is skipped; the failure
// was handled, so the run succeeds; without a handler it fails.
func TestTriggerRules(t *testing.T) {
	src := `workflow "w" {
  activity "charge" {
    exec { command = ["charge"] }
  }
  activity "ship" {
    exec { command = ["ship", activity.charge.stdout] }
  }
  activity "notify" {
    depends_on = [activity.ship]
    exec { command = ["notify"] }
  }
  activity "refund" {
    trigger_rule = "any_failed"
    when         = activity.ship.status == "failed" && activity.ship.error.type == "exit:3"
    exec { command = ["refund", activity.charge.stdout, activity.ship.error.type] }
  }
  activity "cleanup" {
    trigger_rule = "all_done"
    depends_on   = [activity.ship]
    exec { command = ["cleanup"] }
  }
}`
	run := func(shipErr string) *harness {
		h := realHarness(t, loadWF(t, src), nil, nil)
		h.start()
		h.succeed("charge", `{"stdout":"ch_1"}`)
		r := h.finish("ship", fail(shipErr))
		skipped := eventsOf(r, event.ActivitySkipped)
		if len(skipped) == 0 || skipped[0].Activity != "activity.notify" || skipped[0].Reason != event.ReasonUpstreamFailed {
			t.Errorf("skipped %+v", skipped)
		}
		return h
	}
	h := run("exit:3")
	if _, ok := h.starts["cleanup"]; !ok {
		t.Fatal("cleanup did not start")
	}
	s, ok := h.starts["refund"]
	if !ok || strings.Join(s.Spec.Exec.Command, " ") != "refund ch_1 exit:3" {
		t.Fatalf("refund: %+v", s)
	}
	h.succeed("cleanup", `{}`)
	h.succeed("refund", `{}`)
	done := h.eventsOf(event.RunCompleted)
	if len(done) != 1 || done[0].Status != event.StatusSucceeded || done[0].Summary.Failed != 1 || done[0].Summary.Skipped != 1 {
		t.Errorf("handled failure: %+v %+v", done, done[0].Summary)
	}
	if r := h.state.activity(daddr, "notify"); r.Status != record.StatusSkipped || r.FailReason != event.ReasonUpstreamFailed {
		t.Errorf("notify record %+v", r)
	}

	// when is false for another error: refund is skipped; cleanup still
	// succeeds, and all_done handles the failure too (SPEC §10).
	h = run("exit:4")
	if _, ok := h.starts["refund"]; ok {
		t.Fatal("refund ran for exit:4")
	}
	if sk := h.eventsOf(event.ActivitySkipped); len(sk) != 2 || sk[1].Activity != "activity.refund" || sk[1].Reason != event.ReasonConditionFalse {
		t.Errorf("skips %+v", sk)
	}
	h.finish("cleanup", fail("exit:1"))
	done = h.eventsOf(event.RunCompleted)
	if len(done) != 1 || done[0].Status != event.StatusFailed {
		t.Errorf("unhandled failure: %+v", done)
	}

	// Nothing failed: refund is skipped (no_upstream_failed); the run
	// succeeds.
	h = realHarness(t, loadWF(t, src), nil, nil)
	h.start()
	h.succeed("charge", `{"stdout":"ch_1"}`)
	r := h.succeed("ship", `{}`)
	if sk := eventsOf(r, event.ActivitySkipped); len(sk) != 1 || sk[0].Activity != "activity.refund" || sk[0].Reason != event.ReasonNoUpstreamFailed {
		t.Errorf("skips %+v", sk)
	}
	h.succeed("notify", `{}`)
	h.succeed("cleanup", `{}`)
	if done := h.eventsOf(event.RunCompleted); len(done) != 1 || done[0].Status != event.StatusSucceeded {
		t.Errorf("done %+v", done)
	}
}

// TestWhenSkipsDownstream: a skipped activity skips what needs it to
// succeed, and never fails the run.
func TestWhenSkipsDownstream(t *testing.T) {
	wf := loadWF(t, `variable "enabled" { default = false }
workflow "w" {
  activity "a" {
    when = var.enabled
    exec { command = ["a"] }
  }
  activity "b" {
    depends_on = [activity.a]
    exec { command = ["b"] }
  }
  activity "c" {
    for_each = toset(["x", "y"])
    when     = each.key == "x"
    exec { command = ["c", each.key] }
  }
}`)
	h := realHarness(t, wf, nil, nil)
	r := h.start()
	if got := sortedStarted(r); strings.Join(got, ",") != `c["x"]` {
		t.Fatalf("started %v", got)
	}
	var reasons []string
	for _, e := range eventsOf(r, event.ActivitySkipped) {
		reasons = append(reasons, e.Activity+":"+e.Reason)
	}
	if want := `activity.a:condition_false,activity.b:upstream_skipped,activity.c["y"]:condition_false`; strings.Join(reasons, ",") != want {
		t.Errorf("skips %s\nwant  %s", strings.Join(reasons, ","), want)
	}
	r = h.succeed(`c["x"]`, `{}`)
	if done := eventsOf(r, event.RunCompleted); len(done) != 1 || done[0].Status != event.StatusSucceeded || done[0].Summary.Skipped != 3 {
		t.Errorf("done %+v", done)
	}
}

// TestMovedAndRemoved: a moved block renames the record before anything
// else is written (same idempotency key, no re-run); a removed activity
// is forgotten, its pending retry cancelled.
func TestMovedAndRemoved(t *testing.T) {
	wf := loadWF(t, `workflow "w" {
  activity "charge" {
    exec { command = ["charge"] }
    retry { maximum_attempts = 5 }
  }
  moved {
    from = activity.charge_card
    to   = activity.charge
  }
}`)
	st := newMemState()
	st.acts[daddr] = map[string]*record.Activity{
		"charge_card": {Workflow: "w", Instance: "default", Name: "charge_card", Generation: 2, IdempotencyKey: "wf2-kept", Status: record.StatusWaiting, Attempts: 2,
			Timer: &record.Timer{Kind: record.TimerRetry, FireAt: t0, Attempt: 3, Set: t0}},
		"gone": {Workflow: "w", Instance: "default", Name: "gone", Generation: 1, Status: record.StatusWaiting, Attempts: 1,
			Timer: &record.Timer{Kind: record.TimerRetry, FireAt: t0.Add(5e9), Attempt: 2, Set: t0}},
	}
	h := realHarness(t, wf, st, nil)
	r := h.start()
	if len(r.Persist) == 0 || r.Persist[0].RenameActivity == nil || r.Persist[0].RenameActivity.From != "charge_card" {
		t.Fatalf("first mutation %+v", r.Persist[0])
	}
	if len(r.Start) != 1 || r.Start[0].Activity != "charge" || r.Start[0].Number != 3 || r.Start[0].IdempotencyKey != "wf2-kept" {
		t.Fatalf("resumed %+v", r.Start)
	}
	mv := eventsOf(r, event.ActivityMoved)
	if len(mv) != 1 || mv[0].Activity != "activity.charge" || mv[0].From != "activity.charge_card" {
		t.Errorf("moved %+v", mv)
	}
	rm := eventsOf(r, event.ActivityRemoved)
	if len(rm) != 1 || rm[0].Activity != "activity.gone" || rm[0].Reason != ReasonRemoved || !strings.Contains(rm[0].Error.Message, "pending retry (attempt 2, due in 5s) was cancelled") {
		t.Errorf("removed %+v", rm)
	}
	if st.activity(daddr, "gone") != nil || st.activity(daddr, "charge_card") != nil || st.activity(daddr, "charge").Generation != 2 {
		t.Errorf("state %v", st.acts[daddr])
	}
	if r.Wake.Equal(t0.Add(5e9)) {
		t.Error("the removed activity's timer is armed")
	}
}

// TestOutputsAndSecrets: outputs are said once what they refer to ended, a
// sensitive one without its value; a secret an activity prints is never
// stored or emitted.
func TestOutputsAndSecrets(t *testing.T) {
	const secret = "s3cr3t-t0ken"
	cfg, diags := config.LoadFiles("cfg", map[string][]byte{"main.wf.hcl": []byte(`
variable "token" {
  default   = "` + secret + `"
  sensitive = true
}
workflow "w" {
  activity "login" {
    exec { command = ["login", var.token] }
  }
  output "who" {
    value = activity.login.stdout
  }
  output "token" {
    value     = var.token
    sensitive = true
  }
}`)}, config.LoadOptions{})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	h := realHarness(t, cfg.Workflows[0], nil, nil)
	r := h.start()
	outs := eventsOf(r, event.OutputKnown)
	if len(outs) != 1 || outs[0].Value.Name != "token" || !outs[0].Value.Sensitive || outs[0].Value.Value != nil {
		t.Fatalf("outputs at start %+v", outs)
	}
	res := h.result("login", &retry.Failure{Type: "exit:1", Message: "bad token " + secret})
	res.Outputs = json.RawMessage(`{"stdout":"token=` + secret + `","stderr":"` + secret + `"}`)
	r = h.record(h.c.AttemptsDone(h.now, []Result{res}))
	for _, step := range h.steps {
		b, _ := json.Marshal(step)
		if strings.Contains(string(b), secret) && !strings.Contains(string(b), `"login","`+secret) {
			// The secret may appear in the attempt's own spec (what runs),
			// never in a record or an event.
			for _, m := range step.Persist {
				mb, _ := json.Marshal(m)
				if strings.Contains(string(mb), secret) {
					t.Errorf("persisted: %s", mb)
				}
			}
			for _, e := range step.Events {
				eb, _ := json.Marshal(e)
				if strings.Contains(string(eb), secret) {
					t.Errorf("emitted: %s", eb)
				}
			}
		}
	}
	if e := eventsOf(r, event.AttemptFailed); len(e) != 1 || e[0].Error.Message != "bad token (sensitive)" {
		t.Errorf("attempt_failed %+v", e)
	}

	// Succeeded: the output is said with the redacted value.
	h = realHarness(t, cfg.Workflows[0], nil, nil)
	h.start()
	r = h.succeed("login", `{"stdout":"user for `+secret+`"}`)
	outs = eventsOf(r, event.OutputKnown)
	if len(outs) != 1 || outs[0].Value.Name != "who" || string(outs[0].Value.Value) != `"user for (sensitive)"` {
		t.Errorf("who %+v", outs)
	}
}

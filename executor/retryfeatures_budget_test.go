package executor_test

import (
	"testing"
	"time"

	"github.com/wf-engine/wf/executor/event"
	"github.com/wf-engine/wf/planner"
	"github.com/wf-engine/wf/statefile/record"
)

// The retry-feature tests of retry budgets (retryfeatures_test.go says
// how they run).

// ---- 4. budget, on_exhausted = "fail" -----------------------------------

func TestRetryFeaturesBudgetFail(t *testing.T) {
	t.Parallel()
	srv := newScriptServer(t, map[string][]reply{
		"/a": {{503, ""}},
		"/b": {{503, ""}},
	})
	s := newStack(t, `
variable "base" { type = string }

retry_budget "api" {
  max_retries  = 3
  window       = "1m"
  on_exhausted = "fail"
}

retry_policy "api" {
  backoff          = "fixed"
  initial_interval = "10ms"
  maximum_attempts = 50
  budget           = retry_budget.api
}

workflow "w" {
  key = "k"
  activity "a" {
    http { url = "${var.base}/a" }
    retry = retry_policy.api
  }
  activity "b" {
    http { url = "${var.base}/b" }
    retry = retry_policy.api
  }
}
`, "base="+srv.URL)
	out, rec, store := s.apply(runLimit)
	if out.Status != event.StatusFailed {
		t.Fatalf("status %q, want failed; events:\n%s", out.Status, rec.dump())
	}
	hitsA, hitsB := len(srv.hitsOf("/a")), len(srv.hitsOf("/b"))
	if hitsA+hitsB != 5 || hitsA < 1 || hitsB < 1 {
		t.Errorf("requests a=%d b=%d, want 5 in all (2 first attempts + 3 retries)", hitsA, hitsB)
	}
	if out.Summary.Retries != 3 || out.Summary.Attempts != 5 {
		t.Errorf("summary: %d attempts %d retries, want 5 and 3", out.Summary.Attempts, out.Summary.Retries)
	}
	// Both activities keep failing, so each is eventually refused.
	for _, name := range []string{"a", "b"} {
		ev := activityFailed(t, rec, name)
		if ev.Reason != event.ReasonBudgetExhausted {
			t.Errorf("%s: reason %q, want budget_exhausted", name, ev.Reason)
		}
		if ev.Error == nil || ev.Error.Type != "budget_exhausted" {
			t.Errorf("%s: error %+v, want type budget_exhausted", name, ev.Error)
		}
		if r := activityRecord(t, store, "w", "k", name); r.FailReason != event.ReasonBudgetExhausted {
			t.Errorf("%s: stored fail reason %q", name, r.FailReason)
		}
	}
	budgets, err := store.Budgets()
	if err != nil {
		t.Fatal(err)
	}
	if b := budgets["api"]; b == nil || len(b.Stamps) != 3 {
		t.Errorf("stored budget = %+v, want 3 grant stamps", b)
	}
}

// ---- 5. budget, on_exhausted = "wait" -----------------------------------

const budgetWaitHCL = `
variable "base" { type = string }

retry_budget "api" {
  max_retries  = 1
  window       = "1s"
  on_exhausted = "wait"
}

retry_policy "api" {
  backoff          = "fixed"
  initial_interval = "10ms"
  maximum_attempts = 3
  budget           = retry_budget.api
}

workflow "w" {
  key = "k"
  activity "a" {
    http { url = "${var.base}/a" }
    retry = retry_policy.api
  }
  activity "b" {
    http { url = "${var.base}/b" }
    retry = retry_policy.api
  }
}
`

func failOnceScripts() map[string][]reply {
	return map[string][]reply{
		"/a": {{503, ""}, {200, ""}},
		"/b": {{503, ""}, {200, ""}},
	}
}

// budgetSplit names the activity whose retry the budget granted at once
// and the one that had to wait, from the first run's events.
func budgetSplit(t *testing.T, rec *recorder) (granted event.Event, wait event.Event) {
	t.Helper()
	wait = rec.waitFor(t, event.BudgetWait, "", runLimit)
	other := "activity.a"
	if wait.Activity == other {
		other = "activity.b"
	}
	var failed []event.Event
	for _, ev := range rec.of(event.AttemptFailed, other) {
		if ev.Attempt == 1 {
			failed = append(failed, ev)
		}
	}
	if len(failed) != 1 {
		t.Fatalf("%s: %d attempt_failed events for attempt 1; events:\n%s", other, len(failed), rec.dump())
	}
	granted = failed[0]
	if granted.Budget == nil || granted.Budget.Used != 1 || granted.Budget.MaxRetries != 1 {
		t.Fatalf("%s attempt 1 failed with budget usage %+v, want 1 of 1 used (the grant)", other, granted.Budget)
	}
	return granted, wait
}

func TestRetryFeaturesBudgetWait(t *testing.T) {
	t.Parallel()
	srv := newScriptServer(t, failOnceScripts())
	s := newStack(t, budgetWaitHCL, "base="+srv.URL)
	store := s.open()
	st := s.start(s.load(), store)
	granted, wait := budgetSplit(t, st.rec)
	out := st.wait(t, runLimit)
	if out.Status != event.StatusSucceeded {
		t.Fatalf("status %q; events:\n%s", out.Status, st.rec.dump())
	}

	// The grant is stamped when the failure is decided, so the waiter's
	// turn comes exactly one window later.
	if wait.FireAt == nil || !wait.FireAt.Equal(granted.Time.Add(time.Second)) {
		t.Fatalf("budget_wait fire_at %v, want the grant %v + 1s", wait.FireAt, granted.Time)
	}
	if wait.DelaySource != "budget" || wait.Attempt != 2 {
		t.Errorf("budget_wait: source %q attempt %d, want budget and 2", wait.DelaySource, wait.Attempt)
	}
	grantedHits := srv.hitsOf("/" + granted.Activity[len("activity."):])
	waitHits := srv.hitsOf("/" + wait.Activity[len("activity."):])
	if len(grantedHits) != 2 || len(waitHits) != 2 {
		t.Fatalf("requests: granted %d, waiting %d; want 2 each", len(grantedHits), len(waitHits))
	}
	if g := grantedHits[1].at.Sub(granted.Time); g > 10*time.Millisecond+timingSlack {
		t.Errorf("the granted retry started %s after its grant, want about 10ms", g)
	}
	second := waitHits[1].at
	if second.Before(*wait.FireAt) {
		t.Errorf("the waiting retry started %s before the budget freed", wait.FireAt.Sub(second))
	}
	if late := second.Sub(*wait.FireAt); late > timingSlack {
		t.Errorf("the waiting retry started %s after the budget freed", late)
	}
	if g := second.Sub(granted.Time); g < time.Second {
		t.Errorf("the waiting retry started %s after the grant, want at least the 1s window", g)
	}
	// The waiting retry's own grant is stamped when its timer fires.
	budgets, err := store.Budgets()
	if err != nil {
		t.Fatal(err)
	}
	b := budgets["api"]
	if b == nil || len(b.Stamps) == 0 || b.Stamps[len(b.Stamps)-1].Before(*wait.FireAt) {
		t.Errorf("stored budget %+v: want a last grant at or after %v", b, wait.FireAt)
	}
}

func TestRetryFeaturesBudgetWaitSurvivesRestart(t *testing.T) {
	t.Parallel()
	srv := newScriptServer(t, failOnceScripts())
	s := newStack(t, budgetWaitHCL, "base="+srv.URL)

	// Run 1: stopped while the budget timer is pending.
	store := s.open()
	st := s.start(s.load(), store)
	granted, wait := budgetSplit(t, st.rec)
	st.run.Stop()
	if out := st.wait(t, runLimit); out.Status != event.StatusInterrupted {
		t.Fatalf("run 1 status %q, want interrupted; events:\n%s", out.Status, st.rec.dump())
	}
	if err := store.Close(); err != nil {
		t.Fatalf("close state: %v", err)
	}
	fireAt := *wait.FireAt
	waiter := wait.Activity[len("activity."):]
	// On a loaded machine run 1 may end after the budget frees; the
	// checks below hold either way: the recorded fire time is kept, and
	// the retry never starts before it.

	// What survived the restart.
	store = s.open()
	budgets, err := store.Budgets()
	if err != nil {
		t.Fatal(err)
	}
	if b := budgets["api"]; b == nil || len(b.Stamps) != 1 || !b.Stamps[0].Equal(granted.Time) {
		t.Fatalf("stored budget after restart = %+v, want the one grant stamped at %v", b, granted.Time)
	}
	r := activityRecord(t, store, "w", "k", waiter)
	if r.Status != record.StatusWaiting || r.Timer == nil || r.Timer.Kind != record.TimerBudget || !r.Timer.FireAt.Equal(fireAt) || r.Timer.Attempt != 2 {
		t.Fatalf("stored %s = status %s timer %+v, want a budget timer for attempt 2 at %v", waiter, r.Status, r.Timer, fireAt)
	}

	// Restart before the budget frees (when run 1 left time for that): a
	// timer restarted from now with the 10ms policy wait would fire
	// before the recorded time, one restarted with a full window would
	// not keep the recorded fire_at.
	if d := time.Until(granted.Time.Add(400 * time.Millisecond)); d > 0 {
		time.Sleep(d)
	}
	st = s.start(s.load(), store)
	for _, a := range st.plan.Instances[0].Activities {
		if a.Name == waiter && a.Action != planner.ActionResume {
			t.Errorf("plan action for %s = %s, want resume", waiter, a.Action)
		}
	}
	out := st.wait(t, runLimit)
	if out.Status != event.StatusSucceeded {
		t.Fatalf("run 2 status %q; events:\n%s", out.Status, st.rec.dump())
	}
	rec := st.rec
	recovered := rec.of(event.TimerRecovered, wait.Activity)
	if len(recovered) != 1 || recovered[0].FireAt == nil || !recovered[0].FireAt.Equal(fireAt) || recovered[0].DelaySource != "budget" {
		t.Fatalf("timer_recovered for %s = %+v, want one at the recorded %v; events:\n%s", waiter, recovered, fireAt, rec.dump())
	}
	// The window was not reset: at restart the grant still counts (when
	// the restart came within the grant's window: on a loaded machine it
	// may come after it, when the grant has rightly expired).
	if u := recovered[0].Budget; recovered[0].Time.Before(granted.Time.Add(time.Second)) && (u == nil || u.Used != 1) {
		t.Errorf("timer_recovered budget usage %+v at %v, want 1 of 1 used (granted at %v)", u, recovered[0].Time, granted.Time)
	}
	hs := srv.hitsOf("/" + waiter)
	if len(hs) != 2 {
		t.Fatalf("%s: %d requests, want 2", waiter, len(hs))
	}
	if hs[1].at.Before(fireAt) {
		t.Errorf("%s retried %s before its recorded time", waiter, fireAt.Sub(hs[1].at))
	}
	if late := hs[1].at.Sub(fireAt); late > timingSlack {
		t.Errorf("%s retried %s after its recorded time", waiter, late)
	}
	atts := attemptsOf(t, store, "w", "k", waiter)
	if len(atts) != 2 || atts[0].Outcome != record.OutcomeFailed || atts[1].Outcome != record.OutcomeSucceeded {
		t.Errorf("%s attempts = %+v, want failed then succeeded (no new generation)", waiter, atts)
	}
}

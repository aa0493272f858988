package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/wf-engine/wf/executor/event"
)

// jsonView prints every event as one JSON object per line (wf apply -json).
// A write error (a closed pipe, `wf apply -json | head`) ends the output,
// never the run: the view keeps draining the bus until it closes.
func jsonView(ctx context.Context, sub *event.Subscription, w io.Writer) error {
	enc := json.NewEncoder(w)
	ended := false
	for {
		batch, ok := sub.Next(ctx)
		if !ok {
			return nil
		}
		for i := range batch {
			if ended {
				break
			}
			ended = enc.Encode(&batch[i]) != nil
		}
	}
}

// plainView prints one line per event for logs and CI (wf apply without a
// terminal).
type plainView struct {
	w io.Writer
	// prefixInstance prefixes lines with the instance address when a run
	// covers several instances.
	prefixInstance bool
	now            func() time.Time
}

func newPlainView(w io.Writer, instances int, now func() time.Time) *plainView {
	return &plainView{w: w, prefixInstance: instances > 1, now: now}
}

// run prints events until the bus closes or ctx is done. A write error (a
// closed pipe or terminal) ends the output, never the run: the view keeps
// draining the bus.
func (v *plainView) run(ctx context.Context, sub *event.Subscription) error {
	ended := false
	for {
		batch, ok := sub.Next(ctx)
		if !ok {
			return nil
		}
		if ended {
			continue
		}
		for _, line := range v.lines(batch) {
			if _, err := fmt.Fprintln(v.w, line); err != nil {
				ended = true
				break
			}
		}
	}
}

// lines formats a batch. An attempt_failed immediately followed by the
// retry_scheduled of the same activity becomes a single line ("attempt 1
// failed (http:503); retry 2 in 1s"): the core emits both in one step, so
// they arrive in the same batch.
func (v *plainView) lines(batch []event.Event) []string {
	var out []string
	for i := 0; i < len(batch); i++ {
		e := batch[i]
		var line string
		if e.Type == event.AttemptFailed && i+1 < len(batch) && batch[i+1].Type == event.RetryScheduled &&
			batch[i+1].Instance == e.Instance && batch[i+1].Activity == e.Activity {
			next := batch[i+1]
			line = fmtAttemptFailed(e) + "; " + fmtRetry(next)
			i++
		} else {
			line = v.format(e)
		}
		if line == "" {
			continue
		}
		// A budget is shared by every instance: its warning has no prefix.
		if v.prefixInstance && e.Instance != "" && e.Activity != "" && e.Type != event.BudgetHigh {
			line = e.Instance + " " + line
		}
		out = append(out, line)
	}
	return out
}

// format returns the line of one event, "" for events that print nothing.
func (v *plainView) format(e event.Event) string {
	switch e.Type {
	case event.Plan:
		return fmtPlan(e)
	case event.AttemptStarted:
		return fmtAttemptStarted(e)
	case event.AttemptSucceeded:
		return fmtAttemptSucceeded(e)
	case event.AttemptFailed:
		return fmtAttemptFailed(e)
	case event.RetryScheduled:
		return e.Activity + ": " + fmtRetry(e)
	case event.TimerRecovered:
		return fmtTimerRecovered(e, v.now())
	case event.BudgetWait:
		return fmtBudgetWait(e)
	case event.BudgetHigh:
		return fmtBudgetHigh(e)
	case event.ActivitySucceeded:
		return fmtActivitySucceeded(e)
	case event.ActivityFailed:
		return fmtActivityFailed(e)
	case event.ActivitySkipped:
		return fmtActivitySkipped(e)
	case event.RunCompleted:
		// The final summary is printed from the run's outcome.
		return ""
	case event.OrphanEnded:
		return fmtOrphanEnded(e)
	case event.OrphanAlive:
		return fmt.Sprintf("%s: error: %s", e.Activity, errMessage(e.Error))
	case event.ActivityRemoved, event.ActivityMoved, event.ActivityExpanded, event.OutputKnown:
		return fmtLanguageEvent(e)
	case event.CircuitOpened, event.CircuitHalfOpen, event.CircuitClosed:
		return fmtCircuit(e)
	case event.CircuitWait:
		return fmt.Sprintf("%s: attempt %d is %s", e.Activity, e.Attempt, fmtCircuitWait(e, e.Time))
	case event.Heartbeat:
		// Once a second per activity: the dashboard and -json show them.
		return ""
	default:
		return fmt.Sprintf("%s: %s", orInstance(e), e.Type)
	}
}

func orInstance(e event.Event) string {
	if e.Activity != "" {
		return e.Activity
	}
	return e.Instance
}

// fmtBudgetHigh is the warning of a budget_high event: the core emits one
// each time a budget's usage crosses 80 %.
func fmtBudgetHigh(e event.Event) string {
	if e.Budget == nil {
		return "warning: a retry budget is at 80 % or more"
	}
	return fmt.Sprintf("warning: retry budget %s is at %s", e.Budget.Name, fmtBudgetUsage(e.Budget))
}

// fmtBudgetUsage is the "9/10 retries per 1m" of a budget.
func fmtBudgetUsage(b *event.BudgetUsage) string {
	return fmt.Sprintf("%d/%d retries per %s", b.Used, b.MaxRetries, fmtDuration(ms(b.WindowMs)))
}

func fmtPlan(e event.Event) string {
	run := 0
	for _, a := range e.Activities {
		if a.Action != "unchanged" {
			run++
		}
	}
	return fmt.Sprintf("%s: starting, %d of %d %s to run", e.Instance, run, len(e.Activities), plural(len(e.Activities), "activity", "activities"))
}

// fmtAttempt is "attempt k/N" while k is within the limit N of the rule
// that speaks; attempts are numbered across rules and interrupted ones are
// numbered but never counted, so beyond N it is "attempt k" alone: never
// k > N.
func fmtAttempt(e event.Event) string {
	if e.MaxAttempts > 0 && e.Attempt <= e.MaxAttempts {
		return fmt.Sprintf("attempt %d/%d", e.Attempt, e.MaxAttempts)
	}
	return fmt.Sprintf("attempt %d", e.Attempt)
}

func fmtAttemptStarted(e event.Event) string {
	s := fmt.Sprintf("%s: %s started", e.Activity, fmtAttempt(e))
	if e.Interrupted > 0 {
		// Interrupted attempts are numbered, not counted against N.
		s += fmt.Sprintf(" (%d interrupted before, not counted)", e.Interrupted)
	}
	return s
}

// fmtOrphanEnded is "activity.x: ended attempt 3 left running by a previous
// wf (process group 4711; PIDs 4711, 4712)".
func fmtOrphanEnded(e event.Event) string {
	var what []string
	if e.ProcessGroup != 0 {
		what = append(what, fmt.Sprintf("process group %d", e.ProcessGroup))
	}
	if len(e.PIDs) > 0 {
		pids := make([]string, len(e.PIDs))
		for i, p := range e.PIDs {
			pids[i] = fmt.Sprint(p)
		}
		what = append(what, plural(len(pids), "PID ", "PIDs ")+strings.Join(pids, ", "))
	}
	s := fmt.Sprintf("%s: ended attempt %d left running by a previous wf", e.Activity, e.Attempt)
	if len(what) > 0 {
		s += " (" + strings.Join(what, "; ") + ")"
	}
	return s
}

func errMessage(e *event.Error) string {
	if e == nil {
		return "error"
	}
	return e.Message
}

func fmtAttemptSucceeded(e event.Event) string {
	return fmt.Sprintf("%s: attempt %d succeeded", e.Activity, e.Attempt) + inMs(e.DurationMs)
}

func fmtAttemptFailed(e event.Event) string {
	return fmt.Sprintf("%s: attempt %d failed (%s)", e.Activity, e.Attempt, errType(e.Error))
}

// fmtRetry is the "retry 2 in 1s" part of a retry_scheduled event.
func fmtRetry(e event.Event) string {
	s := fmt.Sprintf("retry %d", e.Attempt) + inMs(e.DelayMs)
	switch e.DelaySource {
	case "server":
		// The executor marks any delay the activity's failure asked for
		// "server": a Retry-After for http, the error file's retry_after
		// for exec.
		who := "server"
		if e.Kind != "" && e.Kind != "http" {
			who = "activity"
		}
		if e.DelayCapped && e.RequestedDelayMs != nil {
			s += " (" + who + " asked for " + fmtDuration(ms(*e.RequestedDelayMs)) + ", capped by maximum_retry_after)"
		} else {
			s += " (" + who + " asked)"
		}
	case "budget":
		s += " (waiting for the retry budget)"
	case "manual":
		s += " (manual)"
	case event.SourceInterrupted:
		s = fmt.Sprintf("retry %d now (an interrupted attempt does not count against the retry policy)", e.Attempt)
	}
	return s
}

func fmtTimerRecovered(e event.Event, now time.Time) string {
	s := fmt.Sprintf("%s: recovered timer for attempt %d", e.Activity, e.Attempt)
	if e.FireAt != nil {
		if d := e.FireAt.Sub(now); d > 0 {
			s += ", due in " + fmtDuration(d)
		} else {
			s += ", due now"
		}
	}
	return s
}

func fmtBudgetWait(e event.Event) string {
	s := fmt.Sprintf("%s: retry budget", e.Activity)
	if b := e.Budget.Exhausted(); b != nil || e.Budget != nil {
		if b == nil {
			b = e.Budget
		}
		// A nested budget names the level that refused.
		s += fmt.Sprintf(" %s exhausted (%s)", b.Name, fmtBudgetUsage(b))
	} else {
		s += " exhausted"
	}
	s += fmt.Sprintf("; attempt %d waits", e.Attempt)
	if e.DelayMs != nil {
		s += " " + fmtDuration(ms(*e.DelayMs))
	}
	return s
}

func fmtActivitySucceeded(e event.Event) string {
	return fmtActivityEnd(e, "succeeded") + inMs(e.DurationMs)
}

func fmtActivityFailed(e event.Event) string {
	s := fmtActivityEnd(e, "failed")
	if e.Reason != "" {
		s += " (" + fmtReason(e.Reason) + ")"
	}
	if e.Error != nil {
		s += ": " + errType(e.Error)
		if e.Error.Message != "" {
			msg := oneLine(e.Error.Message, 200)
			s += ": " + msg
			if msg != strings.Join(strings.Fields(e.Error.Message), " ") {
				// Cut: say where the whole of it is.
				s += fmt.Sprintf(" (wf history -full %s %s shows it whole)", e.Instance, strings.TrimPrefix(e.Activity, "activity."))
			}
		}
	}
	return s
}

// fmtActivityEnd is "activity.x: succeeded after 3 attempts".
func fmtActivityEnd(e event.Event, how string) string {
	return fmt.Sprintf("%s: %s after %d %s", e.Activity, how, e.Attempt, plural(e.Attempt, "attempt", "attempts"))
}

// fmtReason is a reason code as the plain output shows it: spelled as in
// the JSON events, wf state show, the dashboard and the docs
// (non_retryable, max_attempts, upstream_failed).
func fmtReason(reason string) string { return reason }

func fmtActivitySkipped(e event.Event) string {
	if e.Reason == event.ReasonUpstreamFailed {
		return e.Activity + ": skipped (an upstream activity failed)"
	}
	if e.Reason != "" {
		return e.Activity + ": skipped (" + fmtReason(e.Reason) + ")"
	}
	return e.Activity + ": skipped"
}

// fmtSummary is the last line of a run.
func fmtSummary(status string, s event.Summary) string {
	if status == event.StatusInterrupted {
		return "Apply interrupted; state saved. Run wf apply again to resume."
	}
	head := "Apply complete!"
	if status != event.StatusSucceeded {
		head = "Apply failed!"
	}
	var parts []string
	for _, p := range []struct {
		n    int
		what string
	}{
		{s.Succeeded, "succeeded"}, {s.Failed, "failed"}, {s.Skipped, "skipped"},
		{s.Unchanged, "unchanged"}, {s.Pending, "pending"},
	} {
		if p.n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", p.n, p.what))
		}
	}
	counts := ""
	if len(parts) > 0 {
		counts = ": " + strings.Join(parts, ", ")
	}
	return fmt.Sprintf("%s %d %s%s; %d %s, %d %s in %s.", head,
		s.Activities, plural(s.Activities, "activity", "activities"), counts,
		s.Attempts, plural(s.Attempts, "attempt", "attempts"),
		s.Retries, plural(s.Retries, "retry", "retries"),
		fmtSeconds(ms(s.DurationMs)))
}

func errType(e *event.Error) string {
	if e == nil || e.Type == "" {
		return "error"
	}
	return e.Type
}

func ms(v int64) time.Duration { return time.Duration(v) * time.Millisecond }

// inMs is " in 1.5s" for a duration in milliseconds, "" for none.
func inMs(v *int64) string {
	if v == nil {
		return ""
	}
	return " in " + fmtDuration(ms(*v))
}

// fmtDuration prints short, human durations: 250ms, 1s, 1.5s, 2m0s.
func fmtDuration(d time.Duration) string {
	var s string
	switch {
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Minute:
		s = d.Round(100 * time.Millisecond).String()
	default:
		s = d.Round(time.Second).String()
	}
	// 1h, 1h30m, 2m5s: no zero units at the end ("1h0m0s").
	if strings.HasSuffix(s, "m0s") || strings.HasSuffix(s, "h0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// fmtSeconds prints a run's duration with one decimal, as in "in 4.2s".
func fmtSeconds(d time.Duration) string {
	if d < time.Minute {
		return fmt.Sprintf("%.1fs", d.Seconds())
	}
	return d.Round(100 * time.Millisecond).String()
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// oneLine flattens s to a single line of at most max runes.
func oneLine(s string, max int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > max {
		return string(r[:max-1]) + "…"
	}
	return s
}

// fmtCircuit is the line of a circuit breaker's transition, e.g.
// "breaker payment_api opened: 6 of 10 calls failed in 30s; half-open in 30s".
func fmtCircuit(e event.Event) string {
	c := e.Circuit
	if c == nil {
		return fmt.Sprintf("breaker %s: %s", e.Breaker, e.Type)
	}
	switch e.Type {
	case event.CircuitOpened:
		s := fmt.Sprintf("breaker %s opened: %d of %d %s failed", c.Name, c.Failures, c.Calls, plural(c.Calls, "call", "calls"))
		if c.HalfOpenAt != nil {
			s += "; half-open in " + fmtDuration(c.HalfOpenAt.Sub(e.Time))
		}
		return s
	case event.CircuitHalfOpen:
		return fmt.Sprintf("breaker %s half-open: %d trial %s", c.Name, max(c.HalfOpenCalls, 1), plural(max(c.HalfOpenCalls, 1), "call", "calls"))
	}
	return fmt.Sprintf("breaker %s closed", c.Name)
}

// fmtCircuitWait is SPEC §11's "waiting for circuit payment_api (open,
// half-open in 12s)", or "(half-open, waiting for a trial call)".
func fmtCircuitWait(e event.Event, now time.Time) string {
	name := e.Breaker
	if e.Circuit == nil {
		return "waiting for circuit " + name
	}
	if e.Circuit.State == event.CircuitStateOpen && e.Circuit.HalfOpenAt != nil {
		return fmt.Sprintf("waiting for circuit %s (open, half-open in %s)", name, fmtDuration(max(e.Circuit.HalfOpenAt.Sub(now), 0)))
	}
	return fmt.Sprintf("waiting for circuit %s (half-open, waiting for a trial call)", name)
}

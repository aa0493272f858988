package main

import (
	"strings"
	"testing"
	"time"

	"github.com/wf-engine/wf/executor/event"
)

func TestPlainViewLines(t *testing.T) {
	now := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	at := func(d time.Duration) *time.Time { v := now.Add(d); return &v }
	const inst = "order/order-1001"
	fail := func(n int, typ string) event.Event {
		return event.Event{Type: event.AttemptFailed, Instance: inst, Activity: "activity.charge_card", Attempt: n, Error: &event.Error{Type: typ, Message: "boom"}}
	}
	retry := func(n int, d time.Duration, src string) event.Event {
		return event.Event{Type: event.RetryScheduled, Instance: inst, Activity: "activity.charge_card", Attempt: n, DelayMs: event.Ms(d), DelaySource: src, FireAt: at(d)}
	}
	tests := []struct {
		name      string
		instances int
		batch     []event.Event
		want      []string
	}{
		{
			name:  "failure and retry make one line",
			batch: []event.Event{fail(1, "http:503"), retry(2, time.Second, "policy")},
			want:  []string{"activity.charge_card: attempt 1 failed (http:503); retry 2 in 1s"},
		},
		{
			name:  "server asked",
			batch: []event.Event{fail(2, "http:429"), retry(3, 5*time.Second, "server")},
			want:  []string{"activity.charge_card: attempt 2 failed (http:429); retry 3 in 5s (server asked)"},
		},
		{
			name:  "failure without retry",
			batch: []event.Event{fail(3, "CardDeclined"), {Type: event.ActivityFailed, Instance: inst, Activity: "activity.charge_card", Attempt: 3, Reason: event.ReasonNonRetryable, Error: &event.Error{Type: "CardDeclined", Message: "card\ndeclined"}}},
			want: []string{
				"activity.charge_card: attempt 3 failed (CardDeclined)",
				"activity.charge_card: failed after 3 attempts (non_retryable): CardDeclined: card declined",
			},
		},
		{
			name:  "exec asked",
			batch: []event.Event{fail(2, "Busy"), func() event.Event { e := retry(3, 5*time.Second, "server"); e.Kind = "exec"; return e }()},
			want:  []string{"activity.charge_card: attempt 2 failed (Busy); retry 3 in 5s (activity asked)"},
		},
		{
			name:  "a long error says where it is whole",
			batch: []event.Event{{Type: event.ActivityFailed, Instance: inst, Activity: "activity.charge_card", Attempt: 1, Reason: event.ReasonMaxAttempts, Error: &event.Error{Type: "Boom", Message: strings.Repeat("x ", 150)}}},
			want:  []string{"activity.charge_card: failed after 1 attempt (max_attempts): Boom: " + strings.Repeat("x ", 99) + "x… (wf history -full " + inst + " charge_card shows it whole)"},
		},
		{
			name: "started, succeeded",
			batch: []event.Event{
				{Type: event.AttemptStarted, Instance: inst, Activity: "activity.ship", Attempt: 1, MaxAttempts: 3},
				{Type: event.AttemptStarted, Instance: inst, Activity: "activity.ship", Attempt: 4},
				{Type: event.AttemptSucceeded, Instance: inst, Activity: "activity.ship", Attempt: 1, DurationMs: event.Ms(1500 * time.Millisecond)},
				{Type: event.ActivitySucceeded, Instance: inst, Activity: "activity.ship", Attempt: 1, DurationMs: event.Ms(1500 * time.Millisecond)},
				{Type: event.ActivitySkipped, Instance: inst, Activity: "activity.pack", Reason: event.ReasonUpstreamFailed},
				{Type: event.RunCompleted, Instance: inst, Status: event.StatusSucceeded},
			},
			want: []string{
				"activity.ship: attempt 1/3 started",
				"activity.ship: attempt 4 started",
				"activity.ship: attempt 1 succeeded in 1.5s",
				"activity.ship: succeeded after 1 attempt in 1.5s",
				"activity.pack: skipped (an upstream activity failed)",
			},
		},
		{
			name: "timers",
			batch: []event.Event{
				{Type: event.TimerRecovered, Instance: inst, Activity: "activity.a", Attempt: 3, FireAt: at(2 * time.Second)},
				{Type: event.TimerRecovered, Instance: inst, Activity: "activity.b", Attempt: 2, FireAt: at(-time.Second)},
				{Type: event.BudgetWait, Instance: inst, Activity: "activity.c", Attempt: 4, DelayMs: event.Ms(12 * time.Second),
					Budget: &event.BudgetUsage{Name: "api", Used: 10, MaxRetries: 10, WindowMs: 60000}},
			},
			want: []string{
				"activity.a: recovered timer for attempt 3, due in 2s",
				"activity.b: recovered timer for attempt 2, due now",
				"activity.c: retry budget api exhausted (10/10 retries per 1m); attempt 4 waits 12s",
			},
		},
		{
			name:      "several instances are prefixed",
			instances: 2,
			batch: []event.Event{
				{Type: event.Plan, Instance: inst, Activities: []event.ActivityInfo{{Action: "run"}, {Action: "unchanged"}}},
				fail(1, "exit:1"), retry(2, 250*time.Millisecond, "policy"),
			},
			want: []string{
				inst + ": starting, 1 of 2 activities to run",
				inst + " activity.charge_card: attempt 1 failed (exit:1); retry 2 in 250ms",
			},
		},
		{
			name:      "budget warning is not prefixed",
			instances: 2,
			batch: []event.Event{
				{Type: event.BudgetHigh, Instance: inst, Activity: "activity.charge_card",
					Budget: &event.BudgetUsage{Name: "api", Used: 8, MaxRetries: 10, WindowMs: 60000}},
				fail(1, "exit:1"), retry(2, 250*time.Millisecond, "policy"),
			},
			want: []string{
				"warning: retry budget api is at 8/10 retries per 1m",
				inst + " activity.charge_card: attempt 1 failed (exit:1); retry 2 in 250ms",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := newPlainView(nil, tt.instances, func() time.Time { return now })
			got := v.lines(tt.batch)
			if strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
				t.Errorf("got:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
		})
	}
}

// TestBudgetWarningFromEvent: the warning is the budget_high event's line
// and nothing else's: the core decides when a budget crossed 80 %
// (executor/core TestBudgetHighOncePerCrossing), the view only says so.
func TestBudgetWarningFromEvent(t *testing.T) {
	v := newPlainView(nil, 1, time.Now)
	usage := func(typ event.Type, used int) event.Event {
		return event.Event{Type: typ, Activity: "activity.a", Attempt: 2, DelayMs: event.Ms(time.Second),
			Budget: &event.BudgetUsage{Name: "api", Used: used, MaxRetries: 10, WindowMs: 1000}}
	}
	batch := []event.Event{
		usage(event.RetryScheduled, 9), usage(event.BudgetWait, 10),
		usage(event.BudgetHigh, 8), usage(event.RetryScheduled, 10),
	}
	var warnings []string
	for _, l := range v.lines(batch) {
		if strings.HasPrefix(l, "warning:") {
			warnings = append(warnings, l)
		}
	}
	if want := []string{"warning: retry budget api is at 8/10 retries per 1s"}; strings.Join(warnings, "\n") != strings.Join(want, "\n") {
		t.Errorf("warnings %q, want %q", warnings, want)
	}
}

func TestSummary(t *testing.T) {
	tests := []struct {
		status string
		s      event.Summary
		want   string
	}{
		{event.StatusSucceeded, event.Summary{Activities: 4, Succeeded: 3, Unchanged: 1, Attempts: 7, Retries: 3, DurationMs: 4200},
			"Apply complete! 4 activities: 3 succeeded, 1 unchanged; 7 attempts, 3 retries in 4.2s."},
		{event.StatusFailed, event.Summary{Activities: 3, Succeeded: 1, Failed: 1, Skipped: 1, Attempts: 1, Retries: 1, DurationMs: 90500},
			"Apply failed! 3 activities: 1 succeeded, 1 failed, 1 skipped; 1 attempt, 1 retry in 1m30.5s."},
		{event.StatusInterrupted, event.Summary{Activities: 1, Pending: 1},
			"Apply interrupted; state saved. Run wf apply again to resume."},
	}
	for _, tt := range tests {
		if got := fmtSummary(tt.status, tt.s); got != tt.want {
			t.Errorf("got  %q\nwant %q", got, tt.want)
		}
	}
}

package tui

import (
	"strings"
	"testing"
	"time"

	"github.com/wf-engine/wf/executor/event"
)

// TestDelaySource: a delay the failure asked for is the server's only for
// an http activity; an exec activity asked for it in its error file.
func TestDelaySource(t *testing.T) {
	for _, tt := range []struct{ kind, source, want string }{
		{"http", event.SourceServer, "server"},
		{"exec", event.SourceServer, "activity"},
		{"exec", "policy", "policy"},
		{"", event.SourceServer, "server"},
	} {
		ev := &event.Event{Kind: tt.kind, DelaySource: tt.source}
		if got := delaySource(ev); got != tt.want {
			t.Errorf("kind %q source %q: %q, want %q", tt.kind, tt.source, got, tt.want)
		}
	}
	if got := (retryNote{attempt: 2, source: "activity"}).text(); got != "retry 2 in 0.0s (activity asked)" {
		t.Errorf("retry note: %q", got)
	}
}

// TestPastDueSleep: a sleep whose end has passed (resumed after wf was
// stopped past it) says due now, never a negative or zero countdown.
func TestPastDueSleep(t *testing.T) {
	m, _ := newTestModel(10*time.Second, nil)
	wake := at(5 * time.Second)
	m.Apply([]event.Event{
		{Type: event.Plan, Instance: "w/k", Activities: []event.ActivityInfo{{Activity: "activity.nap", Kind: "sleep", MaxAttempts: 1}}},
		{Type: event.AttemptStarted, Instance: "w/k", Activity: "activity.nap", Kind: "sleep", Attempt: 1, FireAt: &wake},
	})
	got := strings.Join(m.renderDashboard(80), "\n")
	if !strings.Contains(got, "sleep due now") || strings.Contains(got, "0.0s left") {
		t.Errorf("past-due sleep row:\n%s", got)
	}
}

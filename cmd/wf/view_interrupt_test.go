package main

import (
	"context"
	"errors"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wf-engine/wf/executor/event"
)

func TestPlainViewInterruptedLines(t *testing.T) {
	now := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	const inst = "dur/k1"
	tests := []struct {
		name  string
		batch []event.Event
		want  []string
	}{
		{
			name: "interrupted attempt resumes at once",
			batch: []event.Event{
				{Type: event.AttemptFailed, Instance: inst, Activity: "activity.charge", Attempt: 1, Error: &event.Error{Type: "interrupted"}},
				{Type: event.RetryScheduled, Instance: inst, Activity: "activity.charge", Attempt: 2, DelayMs: event.Ms(0), DelaySource: event.SourceInterrupted},
				{Type: event.AttemptStarted, Instance: inst, Activity: "activity.charge", Attempt: 2, MaxAttempts: 1, Interrupted: 1},
			},
			want: []string{
				"activity.charge: attempt 1 failed (interrupted); retry 2 now (an interrupted attempt does not count against the retry policy)",
				"activity.charge: attempt 2 started (1 interrupted before, not counted)",
			},
		},
		{
			name: "orphans",
			batch: []event.Event{
				{Type: event.OrphanEnded, Instance: inst, Activity: "activity.charge", Attempt: 3, ProcessGroup: 4711, PIDs: []int{4711, 4713}},
				{Type: event.OrphanEnded, Instance: inst, Activity: "activity.job", Attempt: 1, PIDs: []int{4714}},
				{Type: event.OrphanAlive, Instance: inst, Activity: "activity.stuck", Attempt: 2, PIDs: []int{99}, Error: &event.Error{Type: "orphan_alive", Message: "attempt 2 ... PID 99 ..."}},
			},
			want: []string{
				"activity.charge: ended attempt 3 left running by a previous wf (process group 4711; PIDs 4711, 4713)",
				"activity.job: ended attempt 1 left running by a previous wf (PID 4714)",
				"activity.stuck: error: attempt 2 ... PID 99 ...",
			},
		},
		{
			name: "opt-out",
			batch: []event.Event{
				{Type: event.ActivityFailed, Instance: inst, Activity: "activity.migrate", Attempt: 1, Reason: event.ReasonInterrupted, Error: &event.Error{Type: "interrupted", Message: "the engine stopped"}},
			},
			want: []string{"activity.migrate: failed after 1 attempt (interrupted): interrupted: the engine stopped"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := newPlainView(nil, 1, func() time.Time { return now }).lines(tt.batch)
			if strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
				t.Errorf("got:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
		})
	}
}

// brokenPipe fails every write after the first n bytes, as a closed pipe.
type brokenPipe struct {
	n      int
	writes int
}

func (b *brokenPipe) Write(p []byte) (int, error) {
	b.writes++
	if b.n <= 0 {
		return 0, syscall.EPIPE
	}
	b.n -= len(p)
	return len(p), nil
}

// TestViewsSurviveClosedOutput: after a write error the views stop
// writing, keep draining the bus until it closes, and report no error.
func TestViewsSurviveClosedOutput(t *testing.T) {
	views := map[string]func(context.Context, *event.Subscription, *brokenPipe) error{
		"json": func(ctx context.Context, s *event.Subscription, w *brokenPipe) error { return jsonView(ctx, s, w) },
		"plain": func(ctx context.Context, s *event.Subscription, w *brokenPipe) error {
			return newPlainView(w, 1, time.Now).run(ctx, s)
		},
	}
	for name, view := range views {
		t.Run(name, func(t *testing.T) {
			bus := event.NewBus()
			sub := bus.Subscribe()
			w := &brokenPipe{n: 10}
			done := make(chan error, 1)
			go func() { done <- view(context.Background(), sub, w) }()
			for i := 1; i <= 1000; i++ {
				bus.Publish(event.Event{Type: event.AttemptStarted, Instance: "w/k", Activity: "activity.a", Attempt: i})
			}
			bus.Close()
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("view returned %v after the output closed", err)
				}
			case <-time.After(60 * time.Second):
				t.Fatal("the view stopped draining the bus")
			}
			if w.writes > 3 {
				t.Errorf("%d writes: the view kept writing to a closed output", w.writes)
			}
		})
	}
	// The apply's own writer swallows the error the same way.
	o := &outputWriter{w: &brokenPipe{}}
	if n, err := o.Write([]byte("x")); n != 1 || err != nil || !errors.Is(o.ended, syscall.EPIPE) {
		t.Fatalf("outputWriter: %d, %v, ended %v", n, err, o.ended)
	}
}

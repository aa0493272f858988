package executor

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/wf-engine/wf/executor/core"
	"github.com/wf-engine/wf/executor/event"
	"github.com/wf-engine/wf/statefile/record"
)

// TestCancelledSingleAttemptResumes: a second Ctrl-C (Cancel) cuts short
// the one attempt an activity without retry block gets; that never ends
// it: the run is interrupted, the state holds a due retry, and the next
// run starts attempt 2 under the same key, then downstream.
func TestCancelledSingleAttemptResumes(t *testing.T) {
	cfg := loadConfig(t, singleHCL)
	clock := newFakeClock(t0)
	store := newMemStore()
	runner := &fakeRunner{clock: clock, store: store, script: map[string][]outcome{"a": {{block: true}, {}}}}
	run, err := Start(context.Background(), Options{Config: cfg, Instances: instances(cfg, nil), Store: store, Runner: runner, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the attempt to start", func() bool { return len(runner.callsOf("a")) == 1 })
	run.Stop()
	run.Cancel()
	out, err := run.Wait()
	if err != nil || out.Status != event.StatusInterrupted {
		t.Fatalf("outcome %+v, %v; want interrupted", out, err)
	}
	rec := store.activity("w/k", "a")
	if rec.Status != record.StatusWaiting || rec.Timer == nil || rec.Timer.Attempt != 2 || rec.Timer.Source != event.SourceInterrupted || rec.Interrupted != 1 || rec.FailReason != "" {
		t.Fatalf("record after the cancel = %+v; want a due retry of attempt 2", rec)
	}
	if a := store.attempt("w/k", "a", 1); a.Outcome != record.OutcomeInterrupted {
		t.Fatalf("attempt 1 = %+v", a)
	}

	clock.Set(t0.Add(time.Minute))
	run, err = Start(context.Background(), Options{Config: cfg, Instances: instances(cfg, map[string]core.Mode{"a": core.ModeResume, "after": core.ModeResume}), Store: store, Runner: runner, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	if out, err := run.Wait(); err != nil || out.Status != event.StatusSucceeded {
		t.Fatalf("resumed run: %+v, %v", out, err)
	}
	calls := runner.callsOf("a")
	if len(calls) != 2 || calls[1].req.Attempt != 2 || calls[1].req.IdempotencyKey != calls[0].req.IdempotencyKey {
		t.Fatalf("calls of a = %+v; want attempt 2 under the same key", calls)
	}
	if len(runner.callsOf("after")) != 1 {
		t.Fatal("downstream did not run")
	}
}

// TestCommitFailureStopsLikeCtrlC: when a commit fails, nothing new
// starts, the attempt still running gets the grace period (it is not
// cancelled at once), the run ends with the error, and what could not be
// saved is saved with the next commit that succeeds.
func TestCommitFailureStopsLikeCtrlC(t *testing.T) {
	cfg := loadConfig(t, `
workflow "w" {
  key = "k"
  activity "slow" {
    exec { command = ["x"] }
  }
  activity "quick" {
    exec { command = ["y"] }
  }
  activity "after" {
    exec { command = ["z"] }
    depends_on = [activity.quick]
  }
}`)
	clock := newFakeClock(t0)
	store := newMemStore()
	store.failAt = 2 // quick's result
	runner := &fakeRunner{clock: clock, store: store, script: map[string][]outcome{"slow": {{block: true}}}}
	run, err := Start(context.Background(), Options{Config: cfg, Instances: instances(cfg, nil), Store: store, Runner: runner, Clock: clock, Grace: 7 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the grace timer", func() bool { return clock.armed(t0.Add(7 * time.Second)) })
	select {
	case <-run.Done():
		t.Fatal("run ended before the grace period: the running attempt was cut short at once")
	case <-time.After(20 * time.Millisecond):
	}
	clock.Set(t0.Add(7 * time.Second))
	out, err := run.Wait()
	if !errors.Is(err, errDiskFull) || out.Status != event.StatusFailed {
		t.Fatalf("outcome %+v, %v; want failed with the commit error", out, err)
	}
	if n := len(runner.callsOf("after")); n != 0 {
		t.Fatal("a new attempt started after the failed commit")
	}
	if q := store.activity("w/k", "quick"); q.Status != record.StatusSucceeded {
		t.Fatalf("quick = %+v; its result must be saved by the next commit", q)
	}
	if s := store.activity("w/k", "slow"); s.Status != record.StatusWaiting || s.Timer == nil || s.Timer.Attempt != 2 {
		t.Fatalf("slow = %+v; want its interrupted attempt recorded, resumable", s)
	}
	if a := store.activity("w/k", "after"); a.Status != record.StatusPending && a.Status != record.StatusWaiting {
		t.Fatalf("after = %+v; want it left to resume", a)
	}
}

package executor

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/wf-engine/wf/executor/core"
	"github.com/wf-engine/wf/executor/event"
	"github.com/wf-engine/wf/statefile"
	"github.com/wf-engine/wf/statefile/record"
)

const flakyHCL = `
workflow "w" {
  key = "k"
  activity "flaky" {
    exec { command = ["x"] }
    retry {
      initial_interval = "1s"
      maximum_attempts = 5
    }
  }
  activity "after" {
    exec { command = ["y"] }
    depends_on = [activity.flaky]
  }
}
`

func TestFlakyActivityRetriedWithBackoff(t *testing.T) {
	cfg := loadConfig(t, flakyHCL)
	clock := newFakeClock(t0)
	store := newMemStore()
	runner := &fakeRunner{clock: clock, store: store, script: map[string][]outcome{"flaky": {{fail: "exit:1"}, {fail: "exit:1"}, {}}}}
	bus := event.NewBus()
	log := watch(t, bus)
	run, err := Start(context.Background(), Options{Config: cfg, Instances: instances(cfg, nil), Store: store, Runner: runner, Bus: bus, Clock: clock, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	fireAt := t0
	for n, wait := range []time.Duration{time.Second, 2 * time.Second} {
		ev := log.wait(t, event.RetryScheduled, "activity.flaky", n+2)
		fireAt = fireAt.Add(wait)
		if !ev.FireAt.Equal(fireAt) {
			t.Fatalf("retry %d fires at %v, want %v", n+2, ev.FireAt, fireAt)
		}
		waitFor(t, "the timer to be armed", func() bool { return clock.armed(fireAt) })
		if got := len(runner.callsOf("flaky")); got != n+1 {
			t.Fatalf("%d attempts before the timer fired, want %d", got, n+1)
		}
		clock.Set(fireAt)
	}
	out, err := run.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if out.Status != event.StatusSucceeded || out.Summary.Attempts != 4 || out.Summary.Retries != 2 || out.Summary.Succeeded != 2 {
		t.Fatalf("outcome = %+v", out)
	}
	calls := runner.callsOf("flaky")
	for i, want := range []time.Time{t0, t0.Add(time.Second), t0.Add(3 * time.Second)} {
		if !calls[i].at.Equal(want) {
			t.Errorf("attempt %d ran at %v, want %v", i+1, calls[i].at, want)
		}
		if !calls[i].recorded {
			t.Errorf("attempt %d started before its start was committed", i+1)
		}
		if calls[i].req.IdempotencyKey != calls[0].req.IdempotencyKey || calls[i].req.Attempt != i+1 {
			t.Errorf("attempt %d request = %+v", i+1, calls[i].req)
		}
	}
	if a := store.attempt("w/k", "flaky", 1); a.Outcome != record.OutcomeFailed || a.Wait != time.Second || !a.HasWait {
		t.Fatalf("attempt 1 record = %+v", a)
	}
	if _, ok := log.find(event.RunCompleted, "", 0); !ok {
		// The bus delivers asynchronously; run_completed must arrive.
		log.wait(t, event.RunCompleted, "", 0)
	}
}

const blockingHCL = `
workflow "w" {
  key = "k"
  activity "slow" {
    exec { command = ["x"] }
    retry {
      initial_interval = "5s"
      maximum_attempts = 3
    }
  }
}
`

func TestStopWithGrace(t *testing.T) {
	tests := []struct {
		name   string
		cancel bool
	}{
		{"stop waits for the grace period", false},
		{"cancel interrupts at once", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := loadConfig(t, blockingHCL)
			clock := newFakeClock(t0)
			store := newMemStore()
			runner := &fakeRunner{clock: clock, store: store, script: map[string][]outcome{"slow": {{block: true}}}}
			run, err := Start(context.Background(), Options{Config: cfg, Instances: instances(cfg, nil), Store: store, Runner: runner, Clock: clock, Grace: 7 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			waitFor(t, "the attempt to start", func() bool { return len(runner.callsOf("slow")) == 1 })
			if tt.cancel {
				run.Cancel()
			} else {
				run.Stop()
				waitFor(t, "the grace timer", func() bool { return clock.armed(t0.Add(7 * time.Second)) })
				select {
				case <-run.Done():
					t.Fatal("run ended before the grace period")
				case <-time.After(20 * time.Millisecond):
				}
				clock.Set(t0.Add(7 * time.Second))
			}
			out, err := run.Wait()
			if err != nil {
				t.Fatal(err)
			}
			if out.Status != event.StatusInterrupted {
				t.Fatalf("status %q", out.Status)
			}
			if a := store.attempt("w/k", "slow", 1); a.Outcome != record.OutcomeInterrupted {
				t.Fatalf("attempt = %+v", a)
			}
			// The retry is recorded so that the next apply resumes it.
			if a := store.activity("w/k", "slow"); a.Status != record.StatusWaiting || a.Timer == nil || a.Timer.Attempt != 2 {
				t.Fatalf("activity = %+v", a)
			}
		})
	}
}

func TestCommitFailureEndsRun(t *testing.T) {
	cfg := loadConfig(t, flakyHCL)
	clock := newFakeClock(t0)
	store := newMemStore()
	store.failAt = 2 // the first attempt's result
	runner := &fakeRunner{clock: clock, store: store}
	run, err := Start(context.Background(), Options{Config: cfg, Instances: instances(cfg, nil), Store: store, Runner: runner, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	_, err = run.Wait()
	if !errors.Is(err, errDiskFull) {
		t.Fatalf("err = %v", err)
	}
	if n := len(runner.callsOf("after")); n != 0 {
		t.Fatalf("downstream started although its start was never committed")
	}

	store = newMemStore()
	store.failAt = 1
	if _, err := Start(context.Background(), Options{Config: cfg, Instances: instances(cfg, nil), Store: store, Runner: runner, Clock: clock}); !errors.Is(err, errDiskFull) {
		t.Fatalf("Start err = %v", err)
	}
}

func TestFireNowFromShell(t *testing.T) {
	cfg := loadConfig(t, `
workflow "w" {
  key = "k"
  activity "a" {
    exec { command = ["x"] }
    retry {
      initial_interval = "1h"
      maximum_attempts = 2
    }
  }
}`)
	clock := newFakeClock(t0)
	store := newMemStore()
	runner := &fakeRunner{clock: clock, store: store, script: map[string][]outcome{"a": {{fail: "http:503"}, {}}}}
	bus := event.NewBus()
	log := watch(t, bus)
	run, err := Start(context.Background(), Options{Config: cfg, Instances: instances(cfg, nil), Store: store, Runner: runner, Bus: bus, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	log.wait(t, event.RetryScheduled, "activity.a", 2)
	run.FireNow("w/k", "activity.a")
	out, err := run.Wait()
	if err != nil || out.Status != event.StatusSucceeded {
		t.Fatalf("outcome %+v, %v", out, err)
	}
	if a := store.attempt("w/k", "a", 2); a.FiredBy != "manual" || !a.Start.Equal(t0) {
		t.Fatalf("attempt 2 = %+v", a)
	}
}

// TestRestartKeepsRecordedTimer: stop mid-backoff, start a new run from the
// same (real) store: the retry fires at its recorded time, not restarted.
func TestRestartKeepsRecordedTimer(t *testing.T) {
	dir := t.TempDir()
	cfg := loadConfig(t, `
workflow "w" {
  key = "k"
  activity "a" {
    exec { command = ["x"] }
    retry {
      initial_interval = "10s"
      maximum_attempts = 3
    }
  }
}`)
	open := func() *statefile.Store {
		st, err := statefile.Open(dir, statefile.Options{Command: "executor test"})
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	st := open()
	clock := newFakeClock(t0)
	runner := &fakeRunner{clock: clock, script: map[string][]outcome{"a": {{fail: "http:503"}, {}}}}
	bus := event.NewBus()
	log := watch(t, bus)
	run, err := Start(context.Background(), Options{Config: cfg, Instances: instances(cfg, nil), Store: st, Runner: runner, Bus: bus, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	log.wait(t, event.RetryScheduled, "activity.a", 2)
	run.Stop()
	if out, err := run.Wait(); err != nil || out.Status != event.StatusInterrupted {
		t.Fatalf("first run: %+v %v", out, err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	checkTimerIndex(t, dir, 1)

	st = open()
	defer st.Close()
	clock2 := newFakeClock(t0.Add(3 * time.Second))
	runner.clock = clock2
	bus2 := event.NewBus()
	log2 := watch(t, bus2)
	run, err = Start(context.Background(), Options{Config: cfg, Instances: instances(cfg, map[string]core.Mode{"a": core.ModeResume}), Store: st, Runner: runner, Bus: bus2, Clock: clock2})
	if err != nil {
		t.Fatal(err)
	}
	fireAt := t0.Add(10 * time.Second)
	if ev := log2.wait(t, event.TimerRecovered, "activity.a", 2); !ev.FireAt.Equal(fireAt) {
		t.Fatalf("recovered timer fires at %v, want %v", ev.FireAt, fireAt)
	}
	waitFor(t, "the recovered timer", func() bool { return clock2.armed(fireAt) })
	clock2.Set(fireAt)
	if out, err := run.Wait(); err != nil || out.Status != event.StatusSucceeded {
		t.Fatalf("second run: %+v %v", out, err)
	}
	atts, err := st.Attempts("w", "k", "a")
	if err != nil {
		t.Fatal(err)
	}
	if len(atts) != 2 || atts[0].Outcome != record.OutcomeFailed || atts[1].Outcome != record.OutcomeSucceeded || !atts[1].Start.Equal(fireAt) {
		for _, a := range atts {
			t.Logf("%+v", *a)
		}
		t.Fatalf("attempt log wrong")
	}
	if atts[0].IdempotencyKey != atts[1].IdempotencyKey {
		t.Fatal("idempotency key changed across the restart")
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	checkTimerIndex(t, dir, 0)
}

// checkTimerIndex checks the closed state in dir as wf state check does
// (the timer index must match the records both ways) and that it holds
// want pending timers: the core tells the store which timer index entries
// need no delete (record.Mutation.NoTimerBefore).
func checkTimerIndex(t *testing.T, dir string, want int) {
	t.Helper()
	rep, err := statefile.Check(dir, statefile.Options{})
	if err != nil {
		t.Fatalf("check state: %v", err)
	}
	if rep.Timers != want {
		t.Fatalf("%d timers in the index, want %d", rep.Timers, want)
	}
}

package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wf-engine/wf/executor/temporal/temporaltest"
)

// These tests run the real wf binary against a real Temporal development
// server (temporaltest), with real wf worker processes and real signals.
// In CI the Temporal CLI must be installed (.ci/run does it); elsewhere
// they skip without it.

func TestMain(m *testing.M) {
	code := m.Run()
	temporaltest.StopShared()
	os.Exit(code)
}

// TestTemporalApplyTwoWorkers applies a workflow with retries on Temporal
// with two wf worker processes, then checks the commands that read what
// Temporal keeps: plan says No changes, history has every attempt, state
// list and show find the instance, and state rm starts it afresh.
func TestTemporalApplyTwoWorkers(t *testing.T) {
	e := newTEnv(t, `
variable "id" { default = "two" }
workflow "tw" {
  key = "k-${var.id}"
  activity "a" {
    exec {
      command = ["./rec.sh"]
      env = { LOG = "log", SUCCEED_ON = "3" }
    }
    retry {
      backoff = "fixed"
      initial_interval = "100ms"
      maximum_attempts = 5
    }
  }
  activity "b" {
    exec {
      command = ["./rec.sh"]
      env = { LOG = "log" }
    }
    depends_on = [activity.a]
  }
  activity "c" {
    exec {
      command = ["./rec.sh"]
      env = { LOG = "log", SUCCEED_ON = "2" }
    }
    retry {
      initial_interval = "50ms"
      maximum_attempts = 3
    }
  }
}
`)
	e.worker()
	e.worker()
	p := e.apply()
	if code := p.wait(t, 90*time.Second); code != 0 {
		t.Fatalf("wf apply exit %d; stderr:\n%s", code, p.stderr.String())
	}
	done := p.waitEvent(t, time.Second, "run_completed", evType("run_completed"))
	if done["status"] != "succeeded" {
		t.Fatalf("run_completed = %v", done)
	}
	p.waitEvent(t, time.Second, "plan event", evType("plan"))
	log := durReadLog(t, filepath.Join(e.dir, "log"))
	if len(log) != 3+1+2 {
		t.Fatalf("the activities ran %d attempts, want 6: %+v", len(log), log)
	}
	hs := e.history("tw/k-two")
	var a []histEntry
	for _, h := range hs {
		if h.Activity == "activity.a" {
			a = append(a, h)
		}
	}
	if len(a) != 3 || a[0].Outcome != "failed" || a[0].Error == nil || a[0].Error.Type != "exit:3" || a[2].Outcome != "succeeded" {
		t.Fatalf("history of activity.a = %+v", a)
	}
	for i := 1; i < len(a); i++ {
		if a[i].IdempotencyKey != a[0].IdempotencyKey {
			t.Errorf("attempt %d has key %s, attempt 1 %s", i+1, a[i].IdempotencyKey, a[0].IdempotencyKey)
		}
		// The wait is Temporal's timer: on time, within an honest margin
		// for a loaded machine.
		if gap := a[i].Start.Sub(a[i-1].End); gap < 100*time.Millisecond || gap > 3*time.Second {
			t.Errorf("attempt %d started %s after attempt %d ended, want about 100ms", i+1, gap, i)
		}
	}

	out, errOut, code := e.wf("plan", "-engine", "temporal", e.dir)
	if code != 0 || !strings.Contains(out, "No changes. Workflow instance tw/k-two is up to date.") {
		t.Fatalf("plan after the run (exit %d):\n%s%s", code, out, errOut)
	}
	out, _, _ = e.wf("plan", "-engine", "temporal", "-var", "id=two", "-replace", "activity.b", e.dir)
	if !strings.Contains(out, "~ activity.b") || !strings.Contains(out, "= activity.a") {
		t.Fatalf("plan -replace activity.b:\n%s", out)
	}
	// -json: the local engine's document, from Temporal's records.
	out, errOut, code = e.wf("plan", "-engine", "temporal", "-json", "-var", "id=two", "-replace", "activity.b", e.dir)
	var doc planDoc
	if err := json.Unmarshal([]byte(out), &doc); code != 0 || err != nil || doc.FormatVersion == "" || !doc.Changes ||
		len(doc.Instances) != 1 || doc.Summary.Rerun != 1 || doc.Summary.Unchanged != 2 {
		t.Fatalf("plan -json (exit %d, %v): %+v\n%s%s", code, err, doc, out, errOut)
	}
	// A changed definition re-runs that activity only.
	main := filepath.Join(e.dir, "main.wf.hcl")
	src, err := os.ReadFile(main)
	if err != nil {
		t.Fatal(err)
	}
	changed := strings.Replace(string(src), `env = { LOG = "log" }`, `env = { LOG = "log", CHANGED = "1" }`, 1)
	if err := os.WriteFile(main, []byte(changed), 0o644); err != nil {
		t.Fatal(err)
	}
	out, _, _ = e.wf("plan", "-engine", "temporal", e.dir)
	if !strings.Contains(out, "~ activity.b") || !strings.Contains(out, "= activity.a") || !strings.Contains(out, "= activity.c") {
		t.Fatalf("plan after changing activity.b:\n%s", out)
	}
	// WF_ENGINE=temporal is the same as -engine temporal.
	t.Setenv("WF_ENGINE", "temporal")
	out, _, _ = e.wf("state", "list")
	if !strings.Contains(out, "tw/k-two") || !strings.Contains(out, "3 activities: 3 succeeded") {
		t.Fatalf("state list:\n%s", out)
	}
	out, _, _ = e.wf("state", "show", "-engine", "temporal", "tw/k-two")
	if !strings.Contains(out, "activity.a") || !strings.Contains(out, "wf/tw/k-two") {
		t.Fatalf("state show:\n%s", out)
	}
	if out, errOut, code := e.wf("state", "rm", "-engine", "temporal", "tw/k-two"); code != 0 {
		t.Fatalf("state rm exit %d: %s%s", code, out, errOut)
	}
	out, _, _ = e.wf("plan", "-engine", "temporal", e.dir)
	if !strings.Contains(out, "Plan: 3 to run") {
		t.Fatalf("plan after state rm:\n%s", out)
	}
}

// TestTemporalKillWorkerMidAttempt kills -9 the only worker while an
// attempt runs: once the heartbeat timeout passes, the attempt is retried
// on a worker started afterwards, with the same idempotency key, and the
// lost attempt is recorded as interrupted.
func TestTemporalKillWorkerMidAttempt(t *testing.T) {
	e := newTEnv(t, `
workflow "km" {
  key = "k"
  activity "a" {
    exec {
      command = ["./rec.sh"]
      env = { LOG = "log", HANG_ON = "1" }
    }
    retry {
      initial_interval = "100ms"
      maximum_attempts = 3
    }
  }
}
`)
	w1 := e.worker()
	p := e.apply()
	p.waitEvent(t, 60*time.Second, "attempt 1 started", attemptStarted("a", 1))
	pidFile := filepath.Join(e.dir, "log.hang.pid")
	waitFile(t, pidFile, 30*time.Second)
	killed := time.Now()
	if err := w1.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// The attempt's process outlives the worker that ran it; end it as an
	// operator would.
	if b, err := os.ReadFile(pidFile); err == nil {
		var pid int
		fmt.Sscan(string(b), &pid)
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	e.worker()
	if code := p.wait(t, 90*time.Second); code != 0 {
		t.Fatalf("wf apply exit %d; stderr:\n%s", code, p.stderr.String())
	}
	log := durReadLog(t, filepath.Join(e.dir, "log"))
	if len(log) != 2 || log[0].Key != log[1].Key {
		t.Fatalf("attempts = %+v, want 2 with one key", log)
	}
	hs := e.history("km/k")
	if len(hs) != 2 || hs[0].Outcome != "interrupted" || hs[0].Error == nil || hs[0].Error.Type != "interrupted" || hs[1].Outcome != "succeeded" {
		t.Fatalf("history = %+v, want attempt 1 interrupted, attempt 2 succeeded", hs)
	}
	if late := log[1].At.Sub(killed); late > 30*time.Second {
		t.Errorf("the lost attempt was retried %s after the kill", late)
	}
}

// TestTemporalKillWorkerMidBackoff kills -9 one of two workers while a
// retry waits: the timer is Temporal's, so the retry fires on time on the
// other worker.
func TestTemporalKillWorkerMidBackoff(t *testing.T) {
	e := newTEnv(t, `
workflow "kb" {
  key = "k"
  activity "a" {
    exec {
      command = ["./rec.sh"]
      env = { LOG = "log", SUCCEED_ON = "2" }
    }
    retry {
      backoff = "fixed"
      initial_interval = "4s"
      maximum_attempts = 3
    }
  }
}
`)
	w1 := e.worker()
	e.worker()
	p := e.apply()
	p.waitEvent(t, 60*time.Second, "retry scheduled", evType("retry_scheduled"))
	if err := w1.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(t, 90*time.Second); code != 0 {
		t.Fatalf("wf apply exit %d; stderr:\n%s", code, p.stderr.String())
	}
	hs := e.history("kb/k")
	if len(hs) != 2 || hs[1].Outcome != "succeeded" || hs[1].IdempotencyKey != hs[0].IdempotencyKey {
		t.Fatalf("history = %+v", hs)
	}
	// On time: the timer fires at 4s; the margin covers a sticky workflow
	// task left with the dead worker (wf worker sets that timeout to 1s)
	// and a loaded machine.
	if gap := hs[1].Start.Sub(hs[0].End); gap < 4*time.Second || gap > 7*time.Second {
		t.Errorf("retry started %s after the failure, want about 4s", gap)
	}
}

// TestTemporalKillApply kills -9 wf apply itself mid-run: the instance
// goes on in Temporal, and wf apply again reattaches and reports its end.
func TestTemporalKillApply(t *testing.T) {
	e := newTEnv(t, `
workflow "ka" {
  key = "k"
  activity "a" {
    exec {
      command = ["./rec.sh"]
      env = { LOG = "log", SUCCEED_ON = "2" }
    }
    retry {
      backoff = "fixed"
      initial_interval = "2s"
      maximum_attempts = 3
    }
  }
  activity "b" {
    exec {
      command = ["./rec.sh"]
      env = { LOG = "log" }
    }
    depends_on = [activity.a]
  }
}
`)
	e.worker()
	p := e.apply()
	p.waitEvent(t, 60*time.Second, "retry scheduled", evType("retry_scheduled"))
	p.kill9(t)
	p2 := e.apply()
	if code := p2.wait(t, 90*time.Second); code != 0 {
		t.Fatalf("second wf apply exit %d; stderr:\n%s", code, p2.stderr.String())
	}
	if !strings.Contains(p2.stderr.String(), "already running on Temporal") {
		t.Errorf("second apply did not say it attaches; stderr:\n%s", p2.stderr.String())
	}
	done := p2.waitEvent(t, time.Second, "run_completed", evType("run_completed"))
	if done["status"] != "succeeded" {
		t.Fatalf("run_completed = %v", done)
	}
	p2.waitEvent(t, time.Second, "activity.b succeeded", func(ev map[string]any) bool {
		return ev["type"] == "activity_succeeded" && ev["activity"] == "activity.b"
	})
	if log := durReadLog(t, filepath.Join(e.dir, "log")); len(log) != 3 {
		t.Fatalf("attempts = %+v, want 3 (nothing ran twice)", log)
	}
}

// TestTemporalConnectionError: an unreachable server is one clear line
// naming the address, exit 1.
func TestTemporalConnectionError(t *testing.T) {
	dir := durSetup(t, `workflow "x" {
  activity "a" {
    exec { command = ["true"] }
  }
}
`)
	cmd := exec.Command(durBinary(t), "plan", "-engine", "temporal", "-temporal-address", "127.0.0.1:1", dir)
	cmd.Env = os.Environ()
	out, err := cmd.CombinedOutput()
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ExitCode() != 1 {
		t.Fatalf("exit %v, want 1; output:\n%s", err, out)
	}
	if got := strings.TrimSpace(string(out)); got != "Error: cannot reach Temporal at 127.0.0.1:1: connection refused" {
		t.Fatalf("output = %q", got)
	}
}

func waitFile(t *testing.T, path string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if b, err := os.ReadFile(path); err == nil && len(bytes.TrimSpace(b)) > 0 {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("%s did not appear within %s", path, timeout)
}

// TestTemporalSharedBudget: two instances whose activities draw on one
// retry budget, run by two workers: the budget's max_retries holds across
// both (one budget workflow grants every token), not per instance.
func TestTemporalSharedBudget(t *testing.T) {
	budget := fmt.Sprintf("shared_%d", time.Now().UnixNano())
	act := func(wf string) string {
		return `
workflow "` + wf + `" {
  key = "k"
  activity "a" {
    exec {
      command = ["./rec.sh"]
      env = { LOG = "log", SUCCEED_ON = "99" }
    }
    retry {
      backoff = "fixed"
      initial_interval = "50ms"
      maximum_attempts = 5
      budget = retry_budget.` + budget + `
    }
  }
}
`
	}
	e := newTEnv(t, `
retry_budget "`+budget+`" {
  max_retries  = 3
  window       = "10m"
  on_exhausted = "fail"
}
`+act("sb1")+act("sb2"))
	e.worker()
	e.worker()
	p := e.apply()
	if code := p.wait(t, 90*time.Second); code != 1 {
		t.Fatalf("wf apply exit %d, want 1 (both activities end with budget_exhausted); stderr:\n%s", code, p.stderr.String())
	}
	retries := 0
	for _, inst := range []string{"sb1/k", "sb2/k"} {
		hs := e.history(inst)
		for _, h := range hs {
			if h.Attempt > 1 {
				retries++
			}
		}
		out, _, _ := e.wf("state", "show", "-engine", "temporal", inst)
		if !strings.Contains(out, "reason           budget_exhausted") {
			t.Errorf("%s did not fail with budget exhausted:\n%s", inst, out)
		}
	}
	if retries != 3 {
		t.Fatalf("the two instances made %d retries in all; the shared budget allows 3", retries)
	}
}

// TestTemporalDetachAndWatch: Ctrl-C detaches wf apply without stopping
// the instance (exit 130, saying how to follow again); wf watch then
// follows it to its end.
func TestTemporalDetachAndWatch(t *testing.T) {
	e := newTEnv(t, `
workflow "dw" {
  key = "k"
  activity "a" {
    exec {
      command = ["./rec.sh"]
      env = { LOG = "log", SUCCEED_ON = "2" }
    }
    retry {
      backoff = "fixed"
      initial_interval = "3s"
      maximum_attempts = 3
    }
  }
}
`)
	e.worker()
	p := e.apply()
	p.waitEvent(t, 60*time.Second, "retry scheduled", evType("retry_scheduled"))
	if err := p.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(t, 30*time.Second); code != exitInterrupted {
		t.Fatalf("wf apply after Ctrl-C exit %d, want 130; stderr:\n%s", code, p.stderr.String())
	}
	if !strings.Contains(p.stderr.String(), "Detached from dw/k") || !strings.Contains(p.stderr.String(), "wf apply -engine temporal") {
		t.Errorf("no detach message; stderr:\n%s", p.stderr.String())
	}
	// The instance goes on; its pending retry plans as a resume.
	out, errOut, code := e.wf("plan", "-engine", "temporal", e.dir)
	if code != 0 || !strings.Contains(out, "> activity.a") {
		t.Fatalf("plan while the retry is pending (exit %d):\n%s%s", code, out, errOut)
	}
	out, errOut, code = e.wf("watch", "-engine", "temporal", e.dir)
	if code != 0 {
		t.Fatalf("wf watch exit %d:\n%s%s", code, out, errOut)
	}
	if !strings.Contains(out, "activity.a: succeeded after 2 attempts") {
		t.Fatalf("wf watch did not follow the instance to its end:\n%s", out)
	}
	if log := durReadLog(t, filepath.Join(e.dir, "log")); len(log) != 2 {
		t.Fatalf("attempts = %+v, want 2", log)
	}
}

// TestTemporalOwnTimeout: an attempt that exceeds the activity's own
// timeout fails with error type timeout (the worker enforces it), which is
// the activity's failure, not the engine's: it is not "interrupted".
func TestTemporalOwnTimeout(t *testing.T) {
	e := newTEnv(t, `
workflow "to" {
  key = "k"
  activity "slow" {
    exec { command = ["sleep", "5"] }
    timeout = "300ms"
  }
}
`)
	e.worker()
	p := e.apply()
	if code := p.wait(t, 60*time.Second); code != 1 {
		t.Fatalf("wf apply exit %d, want 1; stderr:\n%s", code, p.stderr.String())
	}
	hs := e.history("to/k")
	if len(hs) != 1 || hs[0].Error == nil || hs[0].Error.Type != "timeout" {
		t.Fatalf("history = %+v, want one attempt failed with timeout", hs)
	}
}

// TestTemporalTerminatedInstance: an instance terminated by an operator
// (Temporal's CLI) ends wf apply with an error saying so; the next apply
// resumes it from its records: the pending retry runs with the same key.
func TestTemporalTerminatedInstance(t *testing.T) {
	e := newTEnv(t, `
workflow "tt" {
  key = "k"
  activity "a" {
    exec {
      command = ["./rec.sh"]
      env = { LOG = "log", SUCCEED_ON = "2" }
    }
    retry {
      backoff = "fixed"
      initial_interval = "2s"
      maximum_attempts = 3
    }
  }
}
`)
	e.worker()
	p := e.apply()
	p.waitEvent(t, 60*time.Second, "retry scheduled", evType("retry_scheduled"))
	bin, err := temporaltest.Binary()
	if err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(bin, "workflow", "terminate", "--workflow-id", "wf/tt/k", "--address", e.addr, "--reason", "test").CombinedOutput(); err != nil {
		t.Fatalf("temporal workflow terminate: %v\n%s", err, out)
	}
	if code := p.wait(t, 30*time.Second); code != 1 {
		t.Fatalf("wf apply exit %d after the termination, want 1; stderr:\n%s", code, p.stderr.String())
	}
	if !strings.Contains(p.stderr.String(), "ended on Temporal with status terminated") {
		t.Errorf("stderr does not say the instance was terminated:\n%s", p.stderr.String())
	}
	out, errOut, code := e.wf("plan", "-engine", "temporal", e.dir)
	if code != 0 || !strings.Contains(out, "> activity.a") {
		t.Fatalf("plan after the termination (exit %d):\n%s%s", code, out, errOut)
	}
	p2 := e.apply()
	if code := p2.wait(t, 60*time.Second); code != 0 {
		t.Fatalf("second wf apply exit %d; stderr:\n%s", code, p2.stderr.String())
	}
	log := durReadLog(t, filepath.Join(e.dir, "log"))
	if len(log) != 2 || log[1].Number != 2 || log[0].Key != log[1].Key {
		t.Fatalf("attempts = %+v, want attempt 2 with attempt 1's key", log)
	}
}

// TestTemporalExamplePipeline applies examples/pipeline on Temporal with
// two workers, as docs/temporal.md shows: the typed errors, Retry-After and
// fan-in work as on the local engine.
func TestTemporalExamplePipeline(t *testing.T) {
	srv := temporaltest.Need(t)
	t.Setenv("WF_TEMPORAL_ADDRESS", srv.Address)
	dir := t.TempDir()
	if out, err := exec.Command("cp", "-R", "../../examples/pipeline/.", dir).CombinedOutput(); err != nil {
		t.Fatalf("copy the example: %v\n%s", err, out)
	}
	e := &tenv{t: t, addr: srv.Address, queue: fmt.Sprintf("pipeline-%d", time.Now().UnixNano()), dir: dir}
	e.worker()
	e.worker()
	batch := fmt.Sprintf("e2e-%d", time.Now().UnixNano())
	p := e.apply("-var", "batch="+batch)
	if code := p.wait(t, 90*time.Second); code != 0 {
		t.Fatalf("wf apply exit %d; stderr:\n%s", code, p.stderr.String())
	}
	if _, err := os.Stat(filepath.Join(dir, "out", batch, "report.txt")); err != nil {
		t.Fatalf("the pipeline wrote no report: %v", err)
	}
	var customers []histEntry
	for _, h := range e.history("etl/batch-" + batch) {
		if h.Activity == "activity.extract_customers" {
			customers = append(customers, h)
		}
	}
	if len(customers) != 3 || customers[0].Error == nil || customers[0].Error.Type != "SourceUnavailable" || customers[0].WaitMs == nil || *customers[0].WaitMs != 300 {
		t.Fatalf("extract_customers = %+v, want 2 SourceUnavailable failures waiting the 300ms asked, then success", customers)
	}
	out, _, _ := e.wf("plan", "-engine", "temporal", "-var", "batch="+batch, dir)
	if !strings.Contains(out, "No changes. Workflow instance etl/batch-"+batch+" is up to date.") {
		t.Fatalf("plan after the run:\n%s", out)
	}
}

// TestTemporalTaskQueueRouting: an activity's task_queue sends its
// attempts to the workers of that queue only; until one polls it, the
// attempt waits. Each worker runs attempts in its own checkout, which
// shows where each attempt ran.
func TestTemporalTaskQueueRouting(t *testing.T) {
	e := newTEnv(t, "")
	gpu := e.queue + "-gpu"
	hcl := `
workflow "tq" {
  key = "k"
  activity "m" {
    exec {
      command = ["./rec.sh"]
      env = { LOG = "log" }
    }
  }
  activity "g" {
    exec {
      command = ["./rec.sh"]
      env = { LOG = "log" }
    }
    task_queue = "` + gpu + `"
  }
}
`
	if err := os.WriteFile(filepath.Join(e.dir, "main.wf.hcl"), []byte(hcl), 0o644); err != nil {
		t.Fatal(err)
	}
	gpuDir := t.TempDir()
	if out, err := exec.Command("cp", "-R", e.dir+"/.", gpuDir).CombinedOutput(); err != nil {
		t.Fatalf("copy: %v\n%s", err, out)
	}
	e.worker()
	p := e.apply()
	p.waitEvent(t, 60*time.Second, "activity.m succeeded", func(ev map[string]any) bool {
		return ev["type"] == "activity_succeeded" && ev["activity"] == "activity.m"
	})
	p.waitEvent(t, time.Second, "activity.g started", attemptStarted("g", 1))
	time.Sleep(500 * time.Millisecond)
	if log := durReadLog(t, filepath.Join(gpuDir, "log")); len(log) != 0 {
		t.Fatalf("activity.g ran before a worker polled its queue: %+v", log)
	}
	g := &tenv{t: t, addr: e.addr, queue: gpu, dir: gpuDir}
	g.worker()
	if code := p.wait(t, 60*time.Second); code != 0 {
		t.Fatalf("wf apply exit %d; stderr:\n%s", code, p.stderr.String())
	}
	main, onGPU := durReadLog(t, filepath.Join(e.dir, "log")), durReadLog(t, filepath.Join(gpuDir, "log"))
	if len(main) != 1 || main[0].Activity != "m" || len(onGPU) != 1 || onGPU[0].Activity != "g" {
		t.Fatalf("attempts on the main queue's worker %+v, on the gpu queue's %+v; want m there and g here", main, onGPU)
	}
}

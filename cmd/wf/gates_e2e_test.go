package main

// End-to-end tests of SPEC §11 with the real binary: a circuit breaker
// that is open when wf is killed -9, heartbeats that kill a hung attempt
// and hand progress to the next one (also across kill -9), nested budgets.

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

const breakerHCL = `
circuit_breaker "api" {
  minimum_calls  = 2
  failure_ratio  = 0.5
  window         = "1m"
  break_duration = "10s"
}
workflow "dur" {
  key = "k1"
  activity "a" {
    exec {
      command = ["./rec.sh"]
      env     = { LOG = "log", SUCCEED_ON = "2" }
    }
    retry {
      backoff          = "fixed"
      initial_interval = "200ms"
      maximum_attempts = 5
      circuit_breaker  = circuit_breaker.api
    }
  }
  activity "b" {
    exec {
      command = ["./rec.sh"]
      env     = { LOG = "log", SUCCEED_ON = "2" }
    }
    retry {
      backoff          = "fixed"
      initial_interval = "200ms"
      maximum_attempts = 5
      circuit_breaker  = circuit_breaker.api
    }
  }
}
`

// TestBreakerSurvivesKill9WhileOpen: the two first attempts fail and open
// the breaker; their retries wait for it; wf is killed -9 while it is
// open. The next apply keeps it open until its recorded time (the plan
// says so too), lets one trial through, closes on its success and runs the
// other: no attempt starts while open, on the engine's clock or the
// activity's, and waiting used up no attempt.
func TestBreakerSurvivesKill9WhileOpen(t *testing.T) {
	dir := durSetup(t, breakerHCL)
	p := durStart(t, dir)
	opened := p.waitEvent(t, 30*time.Second, "circuit_opened", isType("circuit_opened"))
	halfOpenAt := circuitTime(t, opened)
	p.waitCount(t, 30*time.Second, "circuit_wait", 2)
	if time.Until(halfOpenAt) < time.Second {
		// The break is 10 s; the retries wait within a second of it
		// opening on any sane machine. In CI the test must run, not skip.
		if os.Getenv("CI") != "" {
			t.Fatalf("the break ends %s after the retries started waiting: too little left to kill wf while it is open", time.Until(halfOpenAt))
		}
		t.Skipf("the machine is too slow for this test: the break ends %s after the retries started waiting", time.Until(halfOpenAt))
	}
	p.kill9(t)

	if plan := durPlan(t, dir); !strings.Contains(plan, "breaker api: open, half-open in") {
		t.Errorf("plan after the crash does not show the open breaker:\n%s", plan)
	}
	p2 := durStart(t, dir)
	if code := p2.wait(t, 60*time.Second); code != 0 {
		t.Fatalf("resumed apply exited %d; stderr:\n%s", code, p2.stderr.String())
	}
	plan := p2.waitEvent(t, time.Second, "plan", isType("plan"))
	circuits, _ := plan["circuits"].([]any)
	if len(circuits) != 1 {
		t.Fatalf("plan circuits = %v", plan["circuits"])
	}
	if c := circuits[0].(map[string]any); c["state"] != "open" || c["half_open_at"] != opened["circuit"].(map[string]any)["half_open_at"] {
		t.Errorf("the restarted run's breaker = %v, want open until the recorded %v", c, halfOpenAt)
	}
	// Engine's clock: nothing started before the end of the break, one
	// trial before circuit_closed.
	var beforeClose int
	closed := false
	for _, ev := range p2.snapshot() {
		switch ev["type"] {
		case "circuit_closed":
			closed = true
		case "attempt_started":
			if at := eventTime(t, ev, "@timestamp"); at.Before(halfOpenAt) {
				t.Errorf("%v attempt %v started %v before the breaker's recorded half-open time", ev["activity"], ev["attempt"], halfOpenAt.Sub(at))
			}
			if !closed {
				beforeClose++
			}
		}
	}
	if !closed || beforeClose != 1 {
		t.Errorf("closed=%v, %d attempts started before it closed; want exactly the one trial", closed, beforeClose)
	}
	// The activity's clock, and the attempt count.
	log := durReadLog(t, filepath.Join(dir, "log"))
	if len(log) != 4 {
		t.Fatalf("attempts = %+v, want 4 (waiting for the breaker is no attempt)", log)
	}
	for _, a := range log {
		if a.Number == 2 && a.At.Before(halfOpenAt) {
			t.Errorf("%s attempt 2 ran %v before the end of the break", a.Activity, halfOpenAt.Sub(a.At))
		}
	}
	if plan := durPlan(t, dir); !strings.Contains(plan, "No changes") {
		t.Errorf("plan after the run:\n%s", plan)
	}
}

func circuitTime(t *testing.T, ev map[string]any) time.Time {
	t.Helper()
	c, _ := ev["circuit"].(map[string]any)
	s, _ := c["half_open_at"].(string)
	at, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t.Fatalf("circuit event %v: %v", ev, err)
	}
	return at
}

func (p *durProc) count(typ string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, ev := range p.events {
		if ev["type"] == typ {
			n++
		}
	}
	return n
}

// waitCount waits until n events of type typ have been printed.
func (p *durProc) waitCount(t *testing.T, timeout time.Duration, typ string, n int) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for p.count(typ) < n {
		select {
		case <-p.done:
			if p.count(typ) < n {
				t.Fatalf("wf exited (%d) before %d %s events; stderr:\n%s", p.exit, n, typ, p.stderr.String())
			}
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %d %s events; stderr:\n%s", n, typ, p.stderr.String())
		}
	}
}

func (p *durProc) snapshot() []map[string]any {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]map[string]any(nil), p.events...)
}

// heartbeatJob counts from its last heartbeat details to $STEPS, one
// step each $STEP_S seconds, writing each step to $WF_HEARTBEAT_FILE and
// a line "attempt start step" per attempt plus "step N" per step to
// $LOG. On attempt $HANG_ON it hangs (in a child that keeps heartbeating
// nothing) once it reached step $HANG_AT.
const heartbeatJob = `#!/bin/sh
start=${WF_HEARTBEAT_DETAILS:-0}
echo "attempt $WF_ATTEMPT $start $$" >> "$LOG"
i=$start
while [ "$i" -lt "$STEPS" ]; do
  i=$((i+1))
  echo "$i" > "$WF_HEARTBEAT_FILE"
  echo "step $i" >> "$LOG"
  if [ "$WF_ATTEMPT" = "$HANG_ON" ] && [ "$i" = "$HANG_AT" ]; then
    sleep 60 &
    echo $! > "$LOG.child"
    wait
  fi
  sleep "$STEP_S"
done
echo "{\"done\": $i}"
`

const heartbeatHCL = `
workflow "hb" {
  key = "k1"
  activity "job" {
    exec {
      command = ["./job.sh"]
      env     = { LOG = "log", STEPS = "%d", STEP_S = "%s", HANG_ON = "%s", HANG_AT = "4" }
    }
    heartbeat_timeout = "%s"
    retry {
      backoff          = "fixed"
      initial_interval = "100ms"
      maximum_attempts = 3
    }
  }
}
`

func hbSetup(t *testing.T, hcl string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "job.sh"), []byte(heartbeatJob), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "main.wf.hcl"), []byte(hcl), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// hbAttempts are the "attempt N START" lines of the job's log.
func hbAttempts(t *testing.T, dir string) [][3]int {
	t.Helper()
	b, _ := os.ReadFile(filepath.Join(dir, "log"))
	var out [][3]int
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) == 4 && f[0] == "attempt" {
			n, _ := strconv.Atoi(f[1])
			s, _ := strconv.Atoi(f[2])
			pid, _ := strconv.Atoi(f[3])
			out = append(out, [3]int{n, s, pid})
		}
	}
	return out
}

// TestHeartbeatTimeoutResumesFromDetails: attempt 1 heartbeats steps 1-4
// and hangs; it is killed with its process group at the deadline
// (heartbeat_timeout), and attempt 2 gets "4" in $WF_HEARTBEAT_DETAILS and
// goes on from there.
func TestHeartbeatTimeoutResumesFromDetails(t *testing.T) {
	dir := hbSetup(t, fmt.Sprintf(heartbeatHCL, 8, "0.05", "1", "1s"))
	p := durStart(t, dir)
	if code := p.wait(t, 60*time.Second); code != 0 {
		t.Fatalf("apply exited %d; stderr:\n%s", code, p.stderr.String())
	}
	failed := p.waitEvent(t, time.Second, "attempt_failed", isType("attempt_failed"))
	if e, _ := failed["error"].(map[string]any); e["type"] != "heartbeat_timeout" {
		t.Fatalf("attempt 1 failed with %v, want heartbeat_timeout", failed["error"])
	}
	atts := hbAttempts(t, dir)
	if len(atts) != 2 || atts[0] != [3]int{1, 0, atts[0][2]} || atts[1][0] != 2 || atts[1][1] != 4 {
		t.Fatalf("attempts (number, resumed from, pid) = %v, want attempt 2 to resume from step 4", atts)
	}
	child := readPIDFile(t, filepath.Join(dir, "log.child"))
	if syscall.Kill(child, 0) == nil && !isZombie(child) {
		t.Errorf("the hung attempt's child %d survived its heartbeat timeout", child)
	}
	hist := durHistory(t, dir, "hb/k1", "job")
	if len(hist) != 2 {
		t.Fatalf("history = %v", hist)
	}
	if got := p.waitEvent(t, time.Second, "a heartbeat event", isType("heartbeat")); got["heartbeat_details"] == "" {
		t.Errorf("heartbeat event without details: %v", got)
	}
}

// TestHeartbeatDetailsSurviveKill9: wf is killed -9 while the job is half
// way; the next apply ends the orphan and starts attempt 2 from the last
// details wf committed (at most a second behind), not from zero.
func TestHeartbeatDetailsSurviveKill9(t *testing.T) {
	dir := hbSetup(t, fmt.Sprintf(heartbeatHCL, 30, "0.2", "0", "5s"))
	p := durStart(t, dir)
	p.waitCount(t, 30*time.Second, "heartbeat", 3)
	p.kill9(t)
	b, _ := os.ReadFile(filepath.Join(dir, "log"))
	reached := strings.Count(string(b), "step ")

	p2 := durStart(t, dir)
	if code := p2.wait(t, 60*time.Second); code != 0 {
		t.Fatalf("resumed apply exited %d; stderr:\n%s", code, p2.stderr.String())
	}
	atts := hbAttempts(t, dir)
	if len(atts) != 2 || atts[1][0] != 2 {
		t.Fatalf("attempts = %v", atts)
	}
	if from := atts[1][1]; from < 2 || from > reached {
		t.Errorf("attempt 2 resumed from step %d; attempt 1 reached step %d before the kill", from, reached)
	}
	if !p2.hasEvent("orphan_ended", nil) && syscall.Kill(atts[0][2], 0) == nil && !isZombie(atts[0][2]) {
		t.Errorf("attempt 1 (pid %d) outlived the crash", atts[0][2])
	}
}

func readPIDFile(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

func isZombie(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i > 0 && i+2 < len(s) && s[i+2] == 'Z'
}

const nestedHCL = `
retry_budget "org" {
  max_retries  = 1
  window       = "1m"
  on_exhausted = "fail"
}
retry_budget "team" {
  max_retries = 10
  window      = "1m"
  parent      = retry_budget.org
}
workflow "dur" {
  key = "k1"
  activity "a" {
    exec {
      command = ["./rec.sh"]
      env     = { LOG = "log", SUCCEED_ON = "9" }
    }
    retry {
      backoff          = "fixed"
      initial_interval = "100ms"
      maximum_attempts = 5
      budget           = retry_budget.team
    }
  }
}
`

// TestNestedBudgetRefusedByParent: team has tokens, its parent org has
// one: the second retry is refused by org and fails the activity, naming
// org; the events carry both levels.
func TestNestedBudgetRefusedByParent(t *testing.T) {
	dir := durSetup(t, nestedHCL)
	p := durStart(t, dir)
	if code := p.wait(t, 60*time.Second); code != 1 {
		t.Fatalf("apply exited %d, want 1; stderr:\n%s", code, p.stderr.String())
	}
	af := p.waitEvent(t, time.Second, "activity_failed", isType("activity_failed"))
	e, _ := af["error"].(map[string]any)
	if af["reason"] != "budget_exhausted" || !strings.Contains(fmt.Sprint(e["message"]), "retry budget org (an ancestor of retry budget team)") {
		t.Fatalf("activity_failed = %v", af)
	}
	b, _ := af["budget"].(map[string]any)
	parent, _ := b["parent"].(map[string]any)
	if b["name"] != "team" || parent["name"] != "org" || parent["used"] != 1.0 {
		t.Errorf("budget levels = %v", b)
	}
	if log := durReadLog(t, filepath.Join(dir, "log")); len(log) != 2 {
		t.Errorf("attempts = %d, want 2 (one retry granted by both levels)", len(log))
	}
}

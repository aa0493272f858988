package main

// The engine's own stops are never the activity's failure (SPEC §4.1):
// tests that kill -9 the real binary, send it real signals and close its
// standard output, then check what the activities themselves observed.

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wf-engine/wf/executor/proc"
)

// waitLogged waits until the recorder logged attempt n of activity.
func waitLogged(t *testing.T, dir, activity string, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		for _, a := range durReadLog(t, filepath.Join(dir, "log")) {
			if a.Activity == activity && a.Number == n {
				return
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("attempt %d of %s never started", n, activity)
}

func attemptsOf(log []durAttempt, activity string) []durAttempt {
	var out []durAttempt
	for _, a := range log {
		if a.Activity == activity {
			out = append(out, a)
		}
	}
	return out
}

// hasEvent reports whether p printed an event of type typ matching all of
// the given field values.
func (p *durProc) hasEvent(typ string, fields map[string]any) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, ev := range p.events {
		if ev["type"] != typ {
			continue
		}
		ok := true
		for k, v := range fields {
			ok = ok && fmt.Sprint(ev[k]) == fmt.Sprint(v)
		}
		if ok {
			return true
		}
	}
	return false
}

const interruptedHCL = `
workflow "dur" {
  key = "k1"
  activity "charge" {
    exec {
      command = ["./rec.sh"]
      env     = { LOG = "log", HANG_ON = "%d", SUCCEED_ON = "%d" }
    }
    %s
  }
  activity "after" {
    exec {
      command = ["./rec.sh"]
      env     = { LOG = "log" }
    }
    depends_on = [activity.charge]
  }
}
`

// TestKillMidSingleAttemptResumes: kill -9 in the middle of an attempt
// that the policy would never retry (no retry block, an allowlist without
// "interrupted", or the last attempt): the next apply starts the next
// attempt under the same key, it succeeds, downstream runs, exit 0.
func TestKillMidSingleAttemptResumes(t *testing.T) {
	tests := []struct {
		name      string
		retry     string
		hangOn    int // the attempt that is running when wf is killed
		succeedOn int
	}{
		{"no retry block", "", 1, 1},
		{"retryable_errors allowlist", `retry {
      retryable_errors = ["NotReady"]
    }`, 1, 1},
		{"no attempts left", `retry {
      initial_interval = "50ms"
      maximum_attempts = 2
    }`, 2, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := durSetup(t, fmt.Sprintf(interruptedHCL, tt.hangOn, tt.succeedOn, tt.retry))
			p := durStart(t, dir)
			waitLogged(t, dir, "charge", tt.hangOn)
			p.kill9(t)

			p2 := durStart(t, dir)
			if code := p2.wait(t, 60*time.Second); code != 0 {
				t.Fatalf("apply after the kill exited %d; stderr:\n%s", code, p2.stderr.String())
			}
			log := durReadLog(t, filepath.Join(dir, "log"))
			charge := attemptsOf(log, "charge")
			if len(charge) != tt.hangOn+1 {
				t.Fatalf("charge ran %d attempts, want %d: %+v", len(charge), tt.hangOn+1, charge)
			}
			for i, a := range charge {
				if a.Number != i+1 || a.Key != charge[0].Key {
					t.Errorf("attempt %d: saw WF_ATTEMPT=%d key %s; want %d under %s", i+1, a.Number, a.Key, i+1, charge[0].Key)
				}
			}
			if n := len(attemptsOf(log, "after")); n != 1 {
				t.Errorf("downstream ran %d times, want 1", n)
			}
			hist := durHistory(t, dir, "dur/k1", "charge")
			if got := hist[tt.hangOn-1]["outcome"]; got != "interrupted" {
				t.Errorf("history of attempt %d: outcome %v, want interrupted", tt.hangOn, got)
			}
			if !p2.hasEvent("orphan_ended", map[string]any{"activity": "activity.charge", "attempt": tt.hangOn}) {
				t.Errorf("no orphan_ended event for the attempt's sleep left behind")
			}
			if out := durPlan(t, dir); !strings.Contains(out, "No changes.") {
				t.Errorf("plan after the resume:\n%s", out)
			}
		})
	}
}

// durPlan is `wf plan -no-color DIR`.
func durPlan(t *testing.T, dir string) string {
	t.Helper()
	out, err := exec.Command(durBinary(t), "plan", "-no-color", dir).CombinedOutput()
	if err != nil {
		t.Fatalf("plan: %v\n%s", err, out)
	}
	return string(out)
}

// TestSignals: SIGINT, SIGTERM and SIGHUP. The first lets the running
// attempt finish and exits 130; a second cancels it, still exits 130, and
// the next apply resumes it with the next attempt and the same key.
func TestSignals(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP} {
		t.Run(sig.String()+" twice", func(t *testing.T) {
			t.Parallel()
			dir := durSetup(t, fmt.Sprintf(interruptedHCL, 1, 1, ""))
			p := durStart(t, dir)
			waitLogged(t, dir, "charge", 1)
			for range 2 {
				if err := p.cmd.Process.Signal(sig); err != nil {
					t.Fatal(err)
				}
				time.Sleep(100 * time.Millisecond)
			}
			if code := p.wait(t, 30*time.Second); code != 130 {
				t.Fatalf("exit %d after two %v, want 130; stderr:\n%s", code, sig, p.stderr.String())
			}
			if !strings.Contains(p.stderr.String(), "cancelling running attempts") {
				t.Errorf("stderr does not say the attempts were cancelled:\n%s", p.stderr.String())
			}
			if out := durPlan(t, dir); !strings.Contains(out, "> activity.charge") {
				t.Errorf("plan after the cancel does not resume charge:\n%s", out)
			}
			p2 := durStart(t, dir)
			if code := p2.wait(t, 60*time.Second); code != 0 {
				t.Fatalf("resumed apply exited %d; stderr:\n%s", code, p2.stderr.String())
			}
			charge := attemptsOf(durReadLog(t, filepath.Join(dir, "log")), "charge")
			if len(charge) != 2 || charge[1].Number != 2 || charge[1].Key != charge[0].Key {
				t.Fatalf("charge attempts %+v; want attempt 2 under the same key", charge)
			}
			if hist := durHistory(t, dir, "dur/k1", "charge"); hist[0]["outcome"] != "interrupted" {
				t.Errorf("attempt 1: %v; want interrupted", hist[0])
			}
		})
	}
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGHUP} {
		t.Run(sig.String()+" once", func(t *testing.T) {
			t.Parallel()
			dir := durSetup(t, `
workflow "dur" {
  key = "k1"
  activity "first" {
    exec {
      command = ["./rec.sh"]
      env     = { LOG = "log", SLEEP_MS = "700" }
    }
  }
  activity "second" {
    exec {
      command = ["./rec.sh"]
      env     = { LOG = "log" }
    }
    depends_on = [activity.first]
  }
}
`)
			p := durStart(t, dir)
			waitLogged(t, dir, "first", 1)
			if err := p.cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			if code := p.wait(t, 30*time.Second); code != 130 {
				t.Fatalf("exit %d after %v, want 130; stderr:\n%s", code, sig, p.stderr.String())
			}
			log := durReadLog(t, filepath.Join(dir, "log"))
			if len(log) != 1 {
				t.Fatalf("after %v: %+v; want only first, let finish", sig, log)
			}
			if hist := durHistory(t, dir, "dur/k1", "first"); len(hist) != 1 || hist[0]["outcome"] != "succeeded" {
				t.Fatalf("first: %v; want it to finish in its grace period", hist)
			}
			p2 := durStart(t, dir)
			if code := p2.wait(t, 60*time.Second); code != 0 {
				t.Fatalf("resumed apply exited %d; stderr:\n%s", code, p2.stderr.String())
			}
			if log = durReadLog(t, filepath.Join(dir, "log")); len(log) != 2 || log[1].Activity != "second" {
				t.Fatalf("after the resume: %+v", log)
			}
		})
	}
}

// TestJSONPipeClosedEarly: `wf apply -json | head -5` with a real pipe:
// the reader goes away after five lines, the apply runs to its end with
// exit 0, and the state says so.
func TestJSONPipeClosedEarly(t *testing.T) {
	t.Parallel()
	var hcl strings.Builder
	hcl.WriteString("workflow \"dur\" {\n  key = \"pipe\"\n")
	for i := range 4 {
		fmt.Fprintf(&hcl, "  activity \"a%d\" {\n    exec {\n      command = [\"./rec.sh\"]\n      env = { LOG = \"log\", SLEEP_MS = \"150\" }\n    }\n", i)
		if i > 0 {
			fmt.Fprintf(&hcl, "    depends_on = [activity.a%d]\n", i-1)
		}
		hcl.WriteString("  }\n")
	}
	hcl.WriteString("}\n")
	dir := durSetup(t, hcl.String())

	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(durBinary(t), "apply", "-auto-approve", "-json", dir)
	cmd.Stdout = w
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	sc := bufio.NewScanner(r)
	for n := 0; n < 5 && sc.Scan(); n++ {
	}
	r.Close() // head exits

	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("apply with its stdout closed: %v; stderr:\n%s", err, stderr.String())
		}
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("apply did not finish")
	}
	if n := len(durReadLog(t, filepath.Join(dir, "log"))); n != 4 {
		t.Fatalf("%d activities ran, want all 4", n)
	}
	if out := durPlan(t, dir); !strings.Contains(out, "No changes.") {
		t.Errorf("plan after the apply:\n%s", out)
	}
}

// TestInterruptedOptOut: non_retryable_errors = ["interrupted"] makes an
// interrupted attempt fail the activity with reason interrupted, and the
// plan then shows it as ! for a person to look at.
func TestInterruptedOptOut(t *testing.T) {
	t.Parallel()
	dir := durSetup(t, fmt.Sprintf(interruptedHCL, 1, 1, `retry {
      maximum_attempts     = 5
      non_retryable_errors = ["interrupted"]
    }`))
	p := durStart(t, dir)
	waitLogged(t, dir, "charge", 1)
	p.kill9(t)
	p2 := durStart(t, dir)
	if code := p2.wait(t, 60*time.Second); code != 1 {
		t.Fatalf("apply after the kill exited %d, want 1; stderr:\n%s", code, p2.stderr.String())
	}
	if !p2.hasEvent("activity_failed", map[string]any{"activity": "activity.charge", "reason": "interrupted"}) {
		t.Errorf("no activity_failed with reason interrupted")
	}
	if n := len(durReadLog(t, filepath.Join(dir, "log"))); n != 1 {
		t.Errorf("%d attempts ran; the opt-out must not run it again", n)
	}
	out := durPlan(t, dir)
	if !strings.Contains(out, "! activity.charge (exec)  # interrupted at attempt 1: the policy says a person must check it first") {
		t.Errorf("plan does not show the opt-out as ! for a person:\n%s", out)
	}
}

// orphanRecorder is an activity whose first attempt starts a grandchild
// that leaves the process group, ignores SIGHUP, sleeps and then writes a
// marker; every attempt logs whether that grandchild is still alive.
const orphanRecorder = `#!/bin/sh
now=$(date +%s%N)
echo "$WF_ACTIVITY $WF_ATTEMPT $WF_IDEMPOTENCY_KEY $now $$" >> log
# A zombie has exited: only its parent's wait is left.
state=$( [ -f gpid ] && sed 's/.*) //' "/proc/$(cat gpid)/stat" 2>/dev/null | cut -d' ' -f1 )
if [ -n "$state" ] && [ "$state" != Z ]; then
  echo "overlap: attempt $WF_ATTEMPT started while the grandchild lives ($state)" >> overlap
fi
if [ "$WF_ATTEMPT" = 1 ]; then
  setsid sh -c 'trap "" HUP; echo $$ > gpid; sleep 2; echo written > marker' &
  sleep 30
fi
echo '{}'
`

// TestOrphanKilledBeforeNextAttempt: after kill -9 of wf, the attempt's
// grandchild (out of its process group, ignoring SIGHUP) is dead before
// attempt 2 starts and never does its side effect.
func TestOrphanKilledBeforeNextAttempt(t *testing.T) {
	t.Parallel()
	dir := durSetup(t, `
workflow "dur" {
  key = "orphan"
  activity "job" {
    exec { command = ["./orphan.sh"] }
  }
}
`)
	if err := os.WriteFile(filepath.Join(dir, "orphan.sh"), []byte(orphanRecorder), 0o755); err != nil {
		t.Fatal(err)
	}
	p := durStart(t, dir)
	deadline := time.Now().Add(30 * time.Second)
	for {
		// Whole: the shell creates the file before it writes the pid.
		if b, err := os.ReadFile(filepath.Join(dir, "gpid")); err == nil && strings.HasSuffix(string(b), "\n") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the grandchild never started")
		}
		time.Sleep(10 * time.Millisecond)
	}
	p.kill9(t)
	b, _ := os.ReadFile(filepath.Join(dir, "gpid"))
	gpid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	if st, err := (&proc.Table{}).Stat(gpid); err != nil || st.Exited() {
		t.Fatalf("grandchild %q is not running after the kill", b)
	}

	p2 := durStart(t, dir)
	if code := p2.wait(t, 60*time.Second); code != 0 {
		t.Fatalf("apply after the kill exited %d; stderr:\n%s", code, p2.stderr.String())
	}
	if b, err := os.ReadFile(filepath.Join(dir, "overlap")); err == nil {
		t.Fatalf("%s", b)
	}
	if !p2.hasEvent("orphan_ended", map[string]any{"activity": "activity.job", "attempt": 1}) {
		t.Errorf("no orphan_ended event")
	}
	time.Sleep(2500 * time.Millisecond) // past the grandchild's sleep
	if _, err := os.Stat(filepath.Join(dir, "marker")); err == nil {
		t.Fatal("the orphaned grandchild did its side effect")
	}
	log := durReadLog(t, filepath.Join(dir, "log"))
	if len(log) != 2 || log[1].Number != 2 || log[1].Key != log[0].Key {
		t.Fatalf("attempts %+v; want attempt 2 under the same key", log)
	}
}

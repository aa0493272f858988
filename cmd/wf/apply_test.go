package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/wf-engine/wf/statefile"
)

// flakyConfig fails its first activity twice (exit 1) before it succeeds;
// the waits are tiny so the test stays fast.
const flakyConfig = `workflow "order" {
  key = "order-1"

  activity "charge" {
    exec {
      script = "n=$(cat count 2>/dev/null || echo 0); n=$((n+1)); echo $n > count; if [ $n -lt 3 ]; then exit 1; fi; echo '{\"id\": \"ch_1\"}'"
    }
    retry {
      maximum_attempts = 5
      initial_interval = "10ms"
      maximum_interval = "20ms"
    }
  }

  activity "ship" {
    exec {
      command = ["echo", activity.charge.result.id]
    }
  }
}
`

func TestPlanGolden(t *testing.T) {
	dir := writeConfig(t, map[string]string{"main.wf.hcl": simpleConfig})
	varFile := filepath.Join(writeConfig(t, map[string]string{"prod.wfvars": "order_id = \"7\"\n"}), "prod.wfvars")
	tests := []struct {
		name   string
		inv    invocation
		golden string
		code   int
	}{
		{name: "plain", inv: invocation{args: []string{"plan", dir}}, golden: "plan.golden"},
		{name: "no-color flag on a terminal", inv: invocation{args: []string{"plan", "-no-color", dir}, terminal: true}, golden: "plan.golden"},
		{name: "NO_COLOR on a terminal", inv: invocation{args: []string{"plan", dir}, env: []string{"NO_COLOR=1"}, terminal: true}, golden: "plan.golden"},
		{name: "colour on a terminal", inv: invocation{args: []string{"plan", dir}, terminal: true}, golden: "plan_color.golden"},
		{name: "detailed exit code", inv: invocation{args: []string{"plan", "-detailed-exitcode", dir}}, golden: "plan.golden", code: 2},
		{name: "flags after the directory", inv: invocation{args: []string{"plan", dir, "--detailed-exitcode", "-no-color"}}, golden: "plan.golden", code: 2},
		{name: "variable", inv: invocation{args: []string{"plan", "-var", "order_id=7", dir}}, golden: "plan_var.golden"},
		{name: "variable file", inv: invocation{args: []string{"plan", dir, "-var-file", varFile}}, golden: "plan_var.golden"},
		{name: "variable from env", inv: invocation{args: []string{"plan", dir}, env: []string{"WF_VAR_order_id=7"}}, golden: "plan_var.golden"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := tt.inv.run(t)
			if r.code != tt.code {
				t.Fatalf("exit %d, want %d; stderr:\n%s", r.code, tt.code, r.stderr)
			}
			checkGolden(t, tt.golden, r.stdout, dir)
		})
	}
	// Planning never creates the state directory.
	if _, err := os.Stat(filepath.Join(dir, ".wf")); !os.IsNotExist(err) {
		t.Errorf("wf plan created the state directory (stat: %v)", err)
	}
}

func TestPlanErrors(t *testing.T) {
	dir := writeConfig(t, map[string]string{"main.wf.hcl": simpleConfig})
	tests := []struct {
		name   string
		args   []string
		stderr string
	}{
		{name: "unknown replace", args: []string{"plan", "-replace", "activity.nope", dir}, stderr: "nope"},
		{name: "unknown workflow", args: []string{"plan", "-workflow", "nope", dir}, stderr: "nope"},
		{name: "undeclared variable", args: []string{"plan", "-var", "zzz=1", dir}, stderr: "zzz"},
		{name: "two directories", args: []string{"plan", dir, dir}, stderr: "too many arguments"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := wf(t, tt.args...)
			if r.code != 1 || !strings.Contains(r.stderr, tt.stderr) {
				t.Errorf("exit %d (want 1), stderr %q does not mention %q", r.code, r.stderr, tt.stderr)
			}
		})
	}
}

func TestPlanLockedState(t *testing.T) {
	dir := writeConfig(t, map[string]string{"main.wf.hcl": simpleConfig})
	// A holder that serves no socket (wf state rm): the reading commands
	// cannot read through it, and say who holds the state. (A running
	// apply answers them: TestReadsWhileApplyRuns.)
	store, err := statefile.Open(filepath.Join(dir, ".wf"), statefile.Options{Command: "wf state rm"})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	for _, args := range [][]string{{"plan", dir}, {"apply", "-auto-approve", dir}, {"state", "list", dir}} {
		r := wf(t, args...)
		if r.code != 1 || !strings.Contains(r.stderr, "state is locked") {
			t.Errorf("wf %s with a held lock: exit %d, stderr %q", args[0], r.code, r.stderr)
		}
	}
}

func TestApplyPlain(t *testing.T) {
	dir := writeConfig(t, map[string]string{"main.wf.hcl": flakyConfig})
	r := wf(t, "apply", "-auto-approve", dir)
	if r.code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	for _, want := range []string{
		"Plan: 2 to run",
		"activity.charge: attempt 1 failed (exit:1); retry 2 in ",
		"activity.charge: attempt 2 failed (exit:1); retry 3 in ",
		"activity.charge: succeeded after 3 attempts",
		"activity.ship: succeeded after 1 attempt",
		"Apply complete! 2 activities: 2 succeeded; 4 attempts, 2 retries in ",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, r.stdout)
		}
	}
	if b, err := os.ReadFile(filepath.Join(dir, ".wf", ".gitignore")); err != nil || len(b) == 0 {
		t.Errorf("state directory has no .gitignore: %v", err)
	}

	// Second apply: nothing to do.
	r = wf(t, "apply", "-auto-approve", dir)
	if r.code != 0 || !strings.Contains(r.stdout, "No changes.") || strings.Contains(r.stdout, "Apply complete") {
		t.Errorf("second apply: exit %d, stdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	// -detailed-exitcode is 0 once up to date.
	if r := wf(t, "plan", "-detailed-exitcode", dir); r.code != 0 {
		t.Errorf("plan -detailed-exitcode after apply: exit %d", r.code)
	}
	// -replace forces a re-run.
	r = wf(t, "plan", "-replace", "activity.ship", "-detailed-exitcode", dir)
	if r.code != 2 || !strings.Contains(r.stdout, "1 to re-run") {
		t.Errorf("plan -replace: exit %d, stdout:\n%s", r.code, r.stdout)
	}
}

func TestApplyFailed(t *testing.T) {
	dir := writeConfig(t, map[string]string{"main.wf.hcl": `workflow "w" {
  activity "boom" {
    exec {
      script = "echo nope >&2; exit 3"
    }
    retry {
      maximum_attempts = 2
      initial_interval = "5ms"
    }
  }
  activity "after" {
    exec { command = ["true"] }
    depends_on = [activity.boom]
  }
}
`})
	r := wf(t, "apply", "-auto-approve", dir)
	if r.code != 1 {
		t.Fatalf("exit %d, want 1\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	for _, want := range []string{
		"activity.boom: attempt 1 failed (exit:3); retry 2 in 5ms",
		"activity.boom: failed after 2 attempts (max_attempts): exit:3",
		"Apply failed!",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, r.stdout)
		}
	}
	// The failed activity is retried from attempt 1 by the next plan.
	r = wf(t, "plan", "-no-color", dir)
	if r.code != 0 || !strings.Contains(r.stdout, "!") {
		t.Errorf("plan after a failure: exit %d, stdout:\n%s", r.code, r.stdout)
	}
}

func TestApplyJSON(t *testing.T) {
	dir := writeConfig(t, map[string]string{"main.wf.hcl": flakyConfig})
	r := wf(t, "apply", "-json", "-auto-approve", dir)
	if r.code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	allowed := map[string]bool{
		"plan": true, "attempt_started": true, "attempt_succeeded": true, "attempt_failed": true,
		"retry_scheduled": true, "timer_recovered": true, "budget_wait": true, "activity_succeeded": true,
		"activity_failed": true, "activity_skipped": true, "run_completed": true,
	}
	seen := map[string]int{}
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	for i, line := range lines {
		var ev map[string]any
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("line %d is not JSON: %v\n%s", i+1, err, line)
		}
		typ, _ := ev["type"].(string)
		if !allowed[typ] {
			t.Errorf("line %d: unknown type %q", i+1, typ)
		}
		seen[typ]++
		ts, _ := ev["@timestamp"].(string)
		if _, err := time.Parse(time.RFC3339, ts); err != nil {
			t.Errorf("line %d: @timestamp %q is not RFC 3339: %v", i+1, ts, err)
		}
		if ev["workflow"] != "order" || ev["instance"] != "order/order-1" {
			t.Errorf("line %d: workflow %v instance %v", i+1, ev["workflow"], ev["instance"])
		}
		switch typ {
		case "attempt_started", "attempt_succeeded", "attempt_failed", "retry_scheduled":
			if a, _ := ev["activity"].(string); !strings.HasPrefix(a, "activity.") {
				t.Errorf("line %d: activity %v", i+1, ev["activity"])
			}
			if n, _ := ev["attempt"].(float64); n < 1 {
				t.Errorf("line %d: attempt %v", i+1, ev["attempt"])
			}
		}
		switch typ {
		case "attempt_failed":
			e, _ := ev["error"].(map[string]any)
			if e["type"] != "exit:1" {
				t.Errorf("line %d: error %v", i+1, ev["error"])
			}
			if _, ok := e["non_retryable"]; !ok {
				t.Errorf("line %d: error lacks non_retryable: %v", i+1, e)
			}
		case "retry_scheduled":
			if _, ok := ev["delay_ms"].(float64); !ok {
				t.Errorf("line %d: no delay_ms", i+1)
			}
			if fa, _ := ev["fire_at"].(string); fa == "" {
				t.Errorf("line %d: no fire_at", i+1)
			}
		case "attempt_succeeded":
			if _, ok := ev["duration_ms"].(float64); !ok {
				t.Errorf("line %d: no duration_ms", i+1)
			}
		case "run_completed":
			if ev["status"] != "succeeded" {
				t.Errorf("line %d: status %v", i+1, ev["status"])
			}
		}
	}
	for typ, n := range map[string]int{"plan": 1, "attempt_started": 4, "attempt_failed": 2, "retry_scheduled": 2, "activity_succeeded": 2, "run_completed": 1} {
		if seen[typ] != n {
			t.Errorf("%d %s events, want %d", seen[typ], typ, n)
		}
	}
	if lines[len(lines)-1] == "" || !strings.Contains(lines[len(lines)-1], `"run_completed"`) {
		t.Errorf("last line is not run_completed: %s", lines[len(lines)-1])
	}
	if r.stderr != "" {
		t.Errorf("stderr: %s", r.stderr)
	}
}

func TestApplyApproval(t *testing.T) {
	dir := writeConfig(t, map[string]string{"main.wf.hcl": simpleConfig})
	r := invocation{args: []string{"apply", dir}, stdin: "yes\n"}.run(t)
	if r.code != 1 || !strings.Contains(r.stderr, "wf apply needs -auto-approve when stdin is not a terminal") {
		t.Errorf("non-terminal stdin: exit %d, stderr %q", r.code, r.stderr)
	}
	if r := wf(t, "apply", "-json", dir); r.code != 1 || !strings.Contains(r.stderr, "-auto-approve") {
		t.Errorf("-json without -auto-approve: exit %d, stderr %q", r.code, r.stderr)
	}
	// On a terminal, anything but "yes" cancels and runs nothing.
	r = invocation{args: []string{"apply", "-no-color", dir}, stdin: "no\n", terminal: true}.run(t)
	if r.code != 1 || !strings.Contains(r.stdout, "Do you want to run these activities?") ||
		!strings.Contains(r.stdout, "Only 'yes' will be accepted to approve.") || !strings.Contains(r.stderr, "cancelled") {
		t.Errorf("answer no: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	if r := wf(t, "plan", "-detailed-exitcode", dir); r.code != 2 {
		t.Errorf("after a cancelled apply the plan should still have changes: exit %d", r.code)
	}
}

func TestPlanOutApplyFile(t *testing.T) {
	dir := writeConfig(t, map[string]string{"main.wf.hcl": simpleConfig})
	planFile := filepath.Join(t.TempDir(), "order.plan")
	r := wf(t, "plan", "-var", "order_id=42", "-out", planFile, dir)
	if r.code != 0 || !strings.Contains(r.stdout, "Saved the plan to: "+planFile) {
		t.Fatalf("plan -out: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	r = wf(t, "apply", planFile)
	if r.code != 0 || !strings.Contains(r.stdout, "Apply complete!") {
		t.Fatalf("apply PLANFILE: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	// The saved -var value was used: that instance is now in state.
	r = wf(t, "state", "list", dir)
	if !strings.HasPrefix(r.stdout, "order/order-42 ") {
		t.Errorf("state list: %q", r.stdout)
	}
	// Applying the same file again: the state changed since, so it is stale.
	r = wf(t, "apply", planFile)
	if r.code != 1 || !strings.Contains(r.stderr, "saved plan is stale") {
		t.Errorf("re-applying a used plan: exit %d, stderr %q", r.code, r.stderr)
	}
}

func TestApplyStalePlanConfigChanged(t *testing.T) {
	dir := writeConfig(t, map[string]string{"main.wf.hcl": simpleConfig})
	planFile := filepath.Join(t.TempDir(), "p.plan")
	if r := wf(t, "plan", "-out", planFile, dir); r.code != 0 {
		t.Fatalf("plan -out: exit %d: %s", r.code, r.stderr)
	}
	changed := strings.Replace(simpleConfig, `"1001"`, `"1002"`, 1)
	if err := os.WriteFile(filepath.Join(dir, "main.wf.hcl"), []byte(changed), 0o644); err != nil {
		t.Fatal(err)
	}
	r := wf(t, "apply", planFile)
	if r.code != 1 || !strings.Contains(r.stderr, "saved plan is stale") {
		t.Errorf("stale plan: exit %d, stderr %q", r.code, r.stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "count")); err == nil {
		t.Errorf("a stale plan ran something")
	}
	if r := wf(t, "apply", "-replace", "activity.ship", planFile); r.code != 1 || !strings.Contains(r.stderr, "saved plan") {
		t.Errorf("-replace with a plan file: exit %d, stderr %q", r.code, r.stderr)
	}
}

// napConfig sleeps for an hour: its apply runs until it is interrupted.
const napConfig = `workflow "w" {
  activity "nap" {
    sleep { duration = "1h" }
  }
}
`

// backgroundApply is a `wf apply -auto-approve` running in-process, with
// the signals sent by the test.
type backgroundApply struct {
	signals        chan<- os.Signal // what wf apply subscribed to
	done           chan int         // gets the exit code
	stdout, stderr strings.Builder
}

// startApply starts wf apply on dir and returns once it has subscribed to
// signals, which it does just before it starts the run.
func startApply(t *testing.T, dir string) *backgroundApply {
	t.Helper()
	a := &backgroundApply{done: make(chan int, 1)}
	notified := make(chan chan<- os.Signal, 1)
	c := &CLI{
		Stdin: strings.NewReader(""), Stdout: &a.stdout, Stderr: &a.stderr,
		Environ:    baseEnv(t),
		IsTerminal: func(any) bool { return false },
		Now:        time.Now,
		Notify: func(ch chan<- os.Signal) func() {
			notified <- ch
			return func() {}
		},
	}
	go func() { a.done <- c.Run(t.Context(), []string{"apply", "-auto-approve", dir}) }()
	select {
	case a.signals = <-notified:
	case code := <-a.done:
		t.Fatalf("apply ended before the interrupt: exit %d\n%s\n%s", code, a.stdout.String(), a.stderr.String())
	}
	return a
}

func TestApplyInterrupt(t *testing.T) {
	dir := writeConfig(t, map[string]string{"main.wf.hcl": napConfig})
	a := startApply(t, dir)
	a.signals <- syscall.SIGINT
	select {
	case code := <-a.done:
		if code != 130 {
			t.Errorf("exit %d, want 130", code)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("apply did not stop after SIGINT")
	}
	if !strings.Contains(a.stderr.String(), "Interrupt received: finishing running attempts") {
		t.Errorf("stderr: %s", a.stderr.String())
	}
	if !strings.Contains(a.stdout.String(), "Apply interrupted; state saved. Run wf apply again to resume.") {
		t.Errorf("stdout: %s", a.stdout.String())
	}
	// The sleep is durable: the next plan resumes it.
	r := wf(t, "plan", "-no-color", dir)
	if r.code != 0 || !strings.Contains(r.stdout, "resume") {
		t.Errorf("plan after interrupt: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
}

func TestWatchWithoutApply(t *testing.T) {
	dir := writeConfig(t, map[string]string{"main.wf.hcl": simpleConfig})
	r := wf(t, "watch", dir)
	if r.code != 1 || !strings.Contains(r.stderr, "no wf apply is running on this state ("+dir+")") {
		t.Errorf("exit %d, stderr %q", r.code, r.stderr)
	}
}

func TestApplyTerminalApproved(t *testing.T) {
	dir := writeConfig(t, map[string]string{"main.wf.hcl": simpleConfig})
	// On a "terminal", yes approves and the dashboard shows the run.
	r := invocation{args: []string{"apply", "-no-color", dir}, stdin: "yes\n", terminal: true}.run(t)
	if r.code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stdout, "Enter a value: ") || !strings.Contains(r.stdout, "Apply complete! 2 activities: 2 succeeded") {
		t.Errorf("stdout:\n%s", r.stdout)
	}
	if r := wf(t, "plan", "-detailed-exitcode", dir); r.code != 0 {
		t.Errorf("plan after the approved apply: exit %d\n%s", r.code, r.stdout)
	}
}

func TestWatchFollowsApply(t *testing.T) {
	dir := writeConfig(t, map[string]string{"main.wf.hcl": napConfig})
	a := startApply(t, dir) // apply is about to start the run; the socket shows when it serves

	// The watcher is started once the socket serves, and the apply is
	// ended only once the watcher has printed the replay, so that no
	// machine is too slow for the test: the watcher ends with the apply.
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if _, err := os.Stat(filepath.Join(dir, ".wf", "events.sock")); err == nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	watchOut := &lockedBuffer{}
	watched := make(chan result, 1)
	go func() {
		var stderr strings.Builder
		code := run(t.Context(), []string{"watch", dir}, strings.NewReader(""), watchOut, &stderr, baseEnv(t))
		watched <- result{code: code, stdout: watchOut.String(), stderr: stderr.String()}
	}()
	for !strings.Contains(watchOut.String(), "activity.nap: attempt 1") && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	a.signals <- syscall.SIGINT
	if code := <-a.done; code != 130 {
		t.Errorf("apply: exit %d, want 130", code)
	}
	select {
	case r := <-watched:
		if r.code != 0 {
			t.Errorf("watch: exit %d: %s", r.code, r.stderr)
		}
		for _, want := range []string{"w/default: starting", "w/default activity.nap: attempt 1"} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("watch output lacks %q:\n%s", want, r.stdout)
			}
		}
	case <-time.After(30 * time.Second):
		t.Fatal("watch did not end with the apply")
	}
}

// lockedBuffer is a strings.Builder safe for a writer and a reader.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

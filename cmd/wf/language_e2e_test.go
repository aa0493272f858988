package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// fanOutConfig lists keys from a file and fetches each; report uses them
// all. Change list.json to change the keys.
const fanOutConfig = `
workflow "w" {
  activity "list" {
    exec { command = ["cat", "list.json"] }
  }
  activity "fetch" {
    for_each = toset(activity.list.result)
    exec { command = ["echo", "got ${each.key}"] }
    retry {
      maximum_attempts = 3
      initial_interval = "10ms"
    }
  }
  activity "report" {
    exec { command = concat(["echo"], [for k, v in activity.fetch : "${k}=${trimspace(v.stdout)}"]) }
  }
  output "report" {
    value = trimspace(activity.report.stdout)
  }
}
`

// TestForEachEndToEnd: a fan-out over an upstream result, in plan, apply
// (plain and -json), history, state, wf output and -replace; changing the
// collection re-plans it, runs the new keys and forgets the old ones.
func TestForEachEndToEnd(t *testing.T) {
	dir := writeConfig(t, map[string]string{"main.wf.hcl": fanOutConfig, "list.json": `["b", "a", "c"]`})
	r := wf(t, "plan", "-no-color", dir)
	if !strings.Contains(r.stdout, "+ activity.fetch (exec)  # one element per key of for_each (known after activity.list)") {
		t.Fatalf("plan:\n%s%s", r.stdout, r.stderr)
	}
	r = wf(t, "apply", "-auto-approve", "-json", dir)
	if r.code != 0 {
		t.Fatalf("apply: exit %d\n%s", r.code, r.stderr)
	}
	var started []string
	var expanded bool
	for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		var ev map[string]any
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("%v: %s", err, line)
		}
		switch ev["type"] {
		case "attempt_started":
			started = append(started, ev["activity"].(string))
		case "activity_expanded":
			expanded = ev["activity"] == "activity.fetch" && len(ev["activities"].([]any)) == 3
		}
	}
	if !expanded || strings.Join(started, " ") != `activity.list activity.fetch["a"] activity.fetch["b"] activity.fetch["c"] activity.report` {
		t.Errorf("expanded %v, started %v", expanded, started)
	}
	if r := wf(t, "output", "w/default", "report", dir); strings.TrimSpace(r.stdout) != `"a=got a b=got b c=got c"` {
		t.Errorf("wf output report: %q %s", r.stdout, r.stderr)
	}
	if r := wf(t, "plan", "-detailed-exitcode", dir); r.code != 0 {
		t.Errorf("second plan: exit %d\n%s", r.code, r.stdout)
	}
	r = wf(t, "history", "w/default", "activity.fetch", dir)
	for _, k := range []string{"a", "b", "c"} {
		if !strings.Contains(r.stdout, `activity.fetch["`+k+`"]`) {
			t.Errorf("history lacks element %s:\n%s", k, r.stdout)
		}
	}
	r = wf(t, "state", "show", "w/default", dir)
	if !strings.Contains(r.stdout, "\nactivity.fetch[\"b\"]\n") {
		t.Errorf("state show:\n%s", r.stdout)
	}

	// One element again, by its address.
	r = wf(t, "plan", "-no-color", `-replace=activity.fetch["b"]`, dir)
	if !strings.Contains(r.stdout, `~ activity.fetch["b"] (exec)  # replacement requested`) || !strings.Contains(r.stdout, `  = activity.fetch["a"] (exec)`) {
		t.Errorf("plan -replace:\n%s%s", r.stdout, r.stderr)
	}
	r = wf(t, "plan", `-replace=activity.fetch["bb"]`, dir)
	if r.code != 1 || !strings.Contains(r.stderr, `Did you mean activity.fetch["b"]?`) {
		t.Errorf("plan -replace of no element: exit %d\n%s", r.code, r.stderr)
	}

	// New keys (list reads them from a file, which is not part of its
	// definition: replace it): d runs, c is forgotten.
	if err := os.WriteFile(filepath.Join(dir, "list.json"), []byte(`["a", "b", "d"]`), 0o644); err != nil {
		t.Fatal(err)
	}
	r = wf(t, "apply", "-auto-approve", "-no-color", "-replace=activity.list", dir)
	if r.code != 0 {
		t.Fatalf("apply: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, want := range []string{
		"~ activity.list (exec)  # replacement requested",
		"+ activity.fetch (exec)  # one element per key of for_each (known after activity.list); the 3 elements in state will run again or be forgotten",
		`activity.fetch["c"]: no longer in for_each; its state was forgotten`,
		`activity.fetch["d"]: attempt 1/3 started`,
		`report = "a=got a b=got b d=got d"`,
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("apply lacks %q:\n%s", want, r.stdout)
		}
	}
	if r := wf(t, "state", "show", "w/default", dir); strings.Contains(r.stdout, `fetch["c"]`) {
		t.Errorf("the removed element is still in state:\n%s", r.stdout)
	}
}

// TestMovedAndRemovedEndToEnd: a moved block keeps a succeeded
// activity's state under its new name (nothing runs again, the key is
// the same); an activity removed while its retry is pending is forgotten
// and its retry cancelled, and the plan said so.
func TestMovedAndRemovedEndToEnd(t *testing.T) {
	dir := writeConfig(t, map[string]string{"main.wf.hcl": `
workflow "w" {
  activity "charge_card" {
    exec { command = ["echo", "charged"] }
  }
  activity "flaky" {
    exec { command = ["false"] }
    retry {
      maximum_attempts = 3
      initial_interval = "1h"
    }
  }
}`})
	// Apply until flaky's retry is pending, then interrupt it.
	var stdout lockedBuffer
	notified := make(chan chan<- os.Signal, 1)
	done := make(chan int, 1)
	c := &CLI{
		Stdin: strings.NewReader(""), Stdout: &stdout, Stderr: &stdout, Environ: baseEnv(t),
		IsTerminal: func(any) bool { return false }, Now: time.Now,
		Notify: func(ch chan<- os.Signal) func() { notified <- ch; return func() {} },
	}
	go func() { done <- c.Run(t.Context(), []string{"apply", "-auto-approve", dir}) }()
	signals := <-notified
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(stdout.String(), "activity.flaky: attempt 1 failed (exit:1); retry 2 in 1h") && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	signals <- syscall.SIGINT
	if code := <-done; code != 130 {
		t.Fatalf("apply: exit %d\n%s", code, stdout.String())
	}
	keyOf := func(name string) string {
		t.Helper()
		r := wf(t, "history", "-json", "w/default", "activity."+name, dir)
		var h struct {
			Key string `json:"idempotency_key"`
		}
		if err := json.Unmarshal([]byte(strings.SplitN(r.stdout, "\n", 2)[0]), &h); err != nil {
			t.Fatalf("history of %s: %v: %s%s", name, err, r.stdout, r.stderr)
		}
		return h.Key
	}
	key := keyOf("charge_card")

	if err := os.WriteFile(filepath.Join(dir, "main.wf.hcl"), []byte(`
workflow "w" {
  activity "charge" {
    exec { command = ["echo", "charged"] }
  }
  moved {
    from = activity.charge_card
    to   = activity.charge
  }
}`), 0o644); err != nil {
		t.Fatal(err)
	}
	r := wf(t, "plan", "-no-color", dir)
	for _, want := range []string{
		"  = activity.charge (exec)  # moved from activity.charge_card\n",
		"  - activity.flaky  # removed from configuration; its state will be forgotten; its pending retry (attempt 2) will be cancelled\n",
		"Plan: 0 to run, 0 to re-run, 0 to resume, 1 unchanged, 1 to forget.\n",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("plan lacks %q:\n%s%s", want, r.stdout, r.stderr)
		}
	}
	r = wf(t, "apply", "-auto-approve", dir)
	if r.code != 0 {
		t.Fatalf("apply: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, want := range []string{
		"activity.charge: state moved from activity.charge_card",
		"activity.flaky: removed from configuration; its state was forgotten (its pending retry (attempt 2, due in ",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("apply lacks %q:\n%s", want, r.stdout)
		}
	}
	if strings.Contains(r.stdout, "attempt 1/1 started") {
		t.Errorf("the moved activity ran again:\n%s", r.stdout)
	}
	if got := keyOf("charge"); got != key {
		t.Errorf("key %s after the move, was %s", got, key)
	}
	if r := wf(t, "state", "show", "w/default", dir); strings.Contains(r.stdout, "flaky") || strings.Contains(r.stdout, "charge_card") {
		t.Errorf("state:\n%s", r.stdout)
	}
	if r := wf(t, "plan", "-detailed-exitcode", dir); r.code != 0 {
		t.Errorf("plan after: exit %d\n%s", r.code, r.stdout)
	}
}

// TestCompensationEndToEnd: shipping fails for good, the refund runs and
// handles it: the run succeeds (exit 0); without the refund's success it
// fails (exit 1).
func TestCompensationEndToEnd(t *testing.T) {
	cfg := func(refund string) string {
		return `
workflow "w" {
  activity "charge" {
    exec { command = ["echo", "ch_1"] }
  }
  activity "ship" {
    exec { command = ["sh", "-c", "echo carrier down >&2; exit 3", activity.charge.stdout] }
  }
  activity "receipt" {
    depends_on = [activity.ship]
    exec { command = ["true"] }
  }
  activity "refund" {
    trigger_rule = "any_failed"
    when         = activity.ship.status == "failed"
    exec { command = ["sh", "-c", "` + refund + `", activity.ship.error.type] }
  }
}`
	}
	dir := writeConfig(t, map[string]string{"main.wf.hcl": cfg("echo refunded after $0")})
	r := wf(t, "apply", "-auto-approve", dir)
	if r.code != 0 {
		t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, want := range []string{
		"activity.ship: failed after 1 attempt (max_attempts): exit:3",
		"activity.receipt: skipped (an upstream activity failed)",
		"activity.refund: succeeded after 1 attempt",
		"Apply complete! 4 activities: 2 succeeded, 1 failed, 1 skipped",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("apply lacks %q:\n%s", want, r.stdout)
		}
	}
	if r := wf(t, "state", "show", "w/default", dir); !strings.Contains(r.stdout, "refunded after exit:3") {
		t.Errorf("state show:\n%s", r.stdout)
	}
	dir = writeConfig(t, map[string]string{"main.wf.hcl": cfg("exit 1")})
	if r := wf(t, "apply", "-auto-approve", dir); r.code != 1 || !strings.Contains(r.stdout, "Apply failed!") {
		t.Errorf("unhandled failure: exit %d\n%s", r.code, r.stdout)
	}
}

// TestExampleFanout runs examples/fanout as its README says, in a copy.
func TestExampleFanout(t *testing.T) {
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(filepath.Join("..", "..", "examples", "fanout"))); err != nil {
		t.Fatal(err)
	}
	r := wf(t, "plan", "-no-color", dir)
	if !strings.Contains(r.stdout, "+ activity.deploy (exec)  # one element per key of for_each (known after activity.list_regions)") {
		t.Errorf("plan:\n%s%s", r.stdout, r.stderr)
	}
	r = wf(t, "apply", "-auto-approve", "-no-color", dir)
	if r.code != 0 {
		t.Fatalf("apply: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, want := range []string{
		"activity.deploy: for_each known: 3 elements",
		`activity.deploy["ap-south"]: attempt 2/3 started`,
		"activity.canary_check: skipped (condition_false)",
		"Outputs:\n\nversions = {\n  \"ap-south\": \"1.4.2\",\n  \"eu-west\": \"1.4.1\",\n  \"us-east\": \"1.4.1\"\n}\n",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("apply lacks %q:\n%s", want, r.stdout)
		}
	}
	if r := wf(t, "plan", "-detailed-exitcode", dir); r.code != 0 {
		t.Errorf("second plan: exit %d\n%s", r.code, r.stdout)
	}
	if r := wf(t, "state", "show", "rollout/default", dir); strings.Contains(r.stdout, "dev-token-1234") || !strings.Contains(r.stdout, "token (sensitive)") {
		t.Errorf("state show:\n%s", r.stdout)
	}
	if r := wf(t, "apply", "-auto-approve", "-var", "canary=true", dir); r.code != 0 || !strings.Contains(r.stdout, "activity.canary_check: succeeded") {
		t.Errorf("canary: exit %d\n%s", r.code, r.stdout)
	}
}
